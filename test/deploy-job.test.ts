// deploy/job.yaml is what a platform team copies: these are the properties that make a one-shot run
// safe (retry only what a retry can fix, no key in the manifest, a locked-down pod).

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';

const root = new URL('../', import.meta.url);

// Loose shapes: the test reads what it asserts on and nothing else.
interface Container {
  name: string;
  image: string;
  args: string[];
  env: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  securityContext: Record<string, unknown>;
  volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[];
}
interface Job {
  apiVersion: string;
  kind: string;
  spec: {
    backoffLimit: number;
    activeDeadlineSeconds: number;
    podFailurePolicy: {
      rules: {
        action: string;
        onExitCodes?: { containerName?: string; operator: string; values: number[] };
        onPodConditions?: { type: string }[];
      }[];
    };
    template: {
      spec: {
        restartPolicy: string;
        automountServiceAccountToken: boolean;
        securityContext: Record<string, unknown>;
        containers: Container[];
        volumes: { name: string; emptyDir?: { sizeLimit?: string } }[];
      };
    };
  };
}

function load(rel: string): string {
  return readFileSync(new URL(rel, root), 'utf8');
}

const job = parse(load('deploy/job.yaml')) as Job;
const pod = job.spec.template.spec;
const container = pod.containers[0]!;

/** The exit codes of docs/design.md and what a Job must do with each. */
const EXIT = { fail: [2, 3, 4], retry: [1, 5, 130, 143] };

/** What Kubernetes does with a failed pod's exit code under the Job's podFailurePolicy (first matching rule). */
function actionFor(code: number): string {
  for (const r of job.spec.podFailurePolicy.rules) {
    const on = r.onExitCodes;
    if (!on || (on.containerName && on.containerName !== container.name)) continue;
    const hit = on.values.includes(code);
    if ((on.operator === 'In' && hit) || (on.operator === 'NotIn' && !hit)) return r.action;
  }
  return 'Count'; // no rule matched: counts against backoffLimit
}

describe('deploy/job.yaml', () => {
  it('is a batch/v1 Job with one container that never restarts in place', () => {
    expect([job.apiVersion, job.kind]).toEqual(['batch/v1', 'Job']);
    expect(pod.containers).toHaveLength(1);
    expect(pod.restartPolicy).toBe('Never');
  });

  it('fails the Job at once on exit codes 2, 3 and 4 and retries 1, 5 and interruptions', () => {
    for (const code of EXIT.fail) expect(actionFor(code), `exit ${code}`).toBe('FailJob');
    for (const code of EXIT.retry) expect(actionFor(code), `exit ${code}`).toBe('Count');
    expect(job.spec.backoffLimit).toBeGreaterThanOrEqual(1);
    expect(
      job.spec.podFailurePolicy.rules.some(
        (r) => r.action === 'Ignore' && r.onPodConditions?.some((c) => c.type === 'DisruptionTarget'),
      ),
    ).toBe(true);
  });

  it('bounds the run: activeDeadlineSeconds longer than the --timeout given with --wait', () => {
    const args = container.args;
    expect(args).toContain('--wait');
    const t = args[args.indexOf('--timeout') + 1] ?? '';
    const m = /^(\d+)(s|m|h)?$/.exec(t);
    expect(m, `--timeout ${t}`).not.toBeNull();
    const seconds = Number(m![1]) * ({ s: 1, m: 60, h: 3600 } as const)[(m![2] ?? 's') as 's' | 'm' | 'h'];
    expect(job.spec.activeDeadlineSeconds).toBeGreaterThan(seconds);
  });

  it('passes --id, --yes and --output json', () => {
    const args = container.args;
    expect(args[args.indexOf('--id') + 1]).toMatch(/\S/);
    expect(args).toContain('--yes');
    expect(args[args.indexOf('--output') + 1]).toBe('json');
  });

  it('takes the key from a Secret and the endpoint from OMNI_ENDPOINT', () => {
    const key = container.env.find((e) => e.name === 'OMNI_SERVICE_ACCOUNT_KEY');
    expect(key?.value).toBeUndefined();
    expect(key?.valueFrom?.secretKeyRef?.name).toBe('stub-provider-key');
    expect(container.env.find((e) => e.name === 'OMNI_ENDPOINT')?.value).toMatch(/^https:\/\//);
  });

  it('locked down: non-root, read-only root, no escalation or capabilities, RuntimeDefault seccomp, no token', () => {
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(pod.securityContext.runAsUser).toBeGreaterThan(0);
    expect(container.securityContext).toMatchObject({
      runAsNonRoot: true,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect((container.securityContext.capabilities as { add?: unknown }).add).toBeUndefined();
  });

  it('gives the read-only pod a writable /tmp from an emptyDir', () => {
    const mount = container.volumeMounts.find((m) => m.mountPath === '/tmp');
    expect(mount).toBeDefined();
    expect(pod.volumes.find((v) => v.name === mount!.name)?.emptyDir).toBeDefined();
  });

  it('runs as the uid the Dockerfile sets', () => {
    const user = /^USER\s+(\d+)/m.exec(load('Dockerfile'))?.[1];
    expect(pod.securityContext.runAsUser).toBe(Number(user));
  });
});

/** A Kubernetes quantity (`128Mi`, `1Gi`, `90M`) in bytes. */
function bytesOf(q: string): number {
  const m = /^(\d+)(Ki|Mi|Gi|K|M|G)?$/.exec(q);
  expect(m, `quantity ${q}`).not.toBeNull();
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, K: 1e3, M: 1e6, G: 1e9 }[m![2] ?? ''] ?? 1;
  return Number(m![1]) * unit;
}

/** docs/performance.md's measured figure: the most a run writes per machine, audit log and report. */
function perMachine(): number {
  const figure = /per machine at most (\d+) bytes of audit log and\s+(\d+) bytes of report/;
  const m = figure.exec(load('docs/performance.md'));
  expect(m, 'the figure in docs/performance.md "What a run writes"').not.toBeNull();
  return Number(m![1]) + Number(m![2]);
}

describe('where the report and the audit log go (sized from the measured figure)', () => {
  const FLEET = 10_000;
  const arg = (flag: string) => container.args[container.args.indexOf(flag) + 1] ?? '';

  it('the Job writes both to the results volume, which holds a 10 000-machine run', () => {
    const mount = container.volumeMounts.find((m) => m.name === 'results')!;
    expect(mount).toBeDefined();
    for (const flag of ['--report', '--audit-log'])
      expect(arg(flag).startsWith(`${mount.mountPath}/`), flag).toBe(true);
    const volume = pod.volumes.find((v) => v.name === 'results')!;
    expect(bytesOf(volume.emptyDir!.sizeLimit!)).toBeGreaterThanOrEqual(FLEET * perMachine());
    // The figure is what was measured (8.0 KB of audit log per bare-metal machine), not a guess below it.
    expect(perMachine()).toBeGreaterThanOrEqual(8000);
  });

  it('a claim that keeps them after the pod ends: the example, its name in the Job, writable by the pod', () => {
    const docs = parseAllDocuments(load('deploy/results-pvc.example.yaml')).map(
      (d) =>
        d.toJS() as {
          kind: string;
          metadata: { name: string };
          spec: { resources: { requests: { storage: string } } };
        },
    );
    expect(docs.map((d) => d.kind)).toEqual(['PersistentVolumeClaim']);
    const claim = docs[0]!;
    expect(bytesOf(claim.spec.resources.requests.storage)).toBeGreaterThanOrEqual(FLEET * perMachine());
    expect(load('deploy/job.yaml')).toMatch(
      new RegExp(`#\\s+persistentVolumeClaim:\\n\\s+#\\s+claimName: ${claim.metadata.name}\\n`),
    );
    expect(pod.securityContext.fsGroup).toBe(pod.securityContext.runAsGroup);
  });
});

describe('deploy/secret.example.yaml', () => {
  it('has the Secret name and key the Job reads, with a placeholder instead of a key', () => {
    const docs = parseAllDocuments(load('deploy/secret.example.yaml')).map(
      (d) =>
        d.toJS() as { kind: string; metadata: { name: string }; stringData?: Record<string, string>; data?: unknown },
    );
    expect(docs).toHaveLength(1);
    const secret = docs[0]!;
    expect(secret.kind).toBe('Secret');
    expect(secret.metadata.name).toBe('stub-provider-key');
    expect(secret.data).toBeUndefined();
    const value = secret.stringData?.OMNI_SERVICE_ACCOUNT_KEY ?? '';
    expect(value).toMatch(/^REPLACE/);
    // A real key is base64 JSON with a PGP private key inside: far longer than a placeholder.
    expect(value.length).toBeLessThan(100);
  });
});
