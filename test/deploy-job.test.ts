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
        volumes: { name: string; emptyDir?: object }[];
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

  it(`runs locked down: non-root, read-only root, no privilege escalation, no capabilities, RuntimeDefault seccomp, no \
token`, () => {
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
