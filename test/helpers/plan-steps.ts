// A plan item's operations read as the steps a person names them: the operations on one resource
// in a row are one step, `dispose T/id` when they end in its Destroy, `release T/id` when they only
// remove finalizers; a wipe is `wipe <machine>`. The Gets the item rests on are left out unless asked.

import type { Operation } from '../../src/provider/plan/operations.js';

export function stepNames(ops: readonly Operation[], o: { byId?: boolean; gets?: boolean } = {}): string[] {
  const out: string[] = [];
  let group: Exclude<Operation, { op: 'wipe' }>[] = [];
  const flush = () => {
    const first = group[0];
    if (!first) return;
    const t = first.target;
    const name = first.op === 'get' ? 'get' : group.some((g) => g.op === 'destroy') ? 'dispose' : 'release';
    const byId = o.byId && 'foundById' in first && first.foundById ? ' (by ID)' : '';
    out.push(`${name} ${t.type.split('.')[0]}/${t.id}${byId}`);
    group = [];
  };
  for (const op of ops) {
    if (op.op === 'get' && !o.gets) continue;
    if (op.op === 'wipe') {
      flush();
      out.push(`wipe ${op.machineId}`);
      continue;
    }
    const prev = group[0];
    if (
      prev &&
      (prev.op === 'get' ||
        op.op === 'get' ||
        prev.target.namespace !== op.target.namespace ||
        prev.target.type !== op.target.type ||
        prev.target.id !== op.target.id)
    )
      flush();
    group.push(op);
  }
  flush();
  return out;
}
