// Runs in every test file (vitest `setupFiles`): an error inside the simulated Omni's controllers
// (src/omni-sim/controllers/controllers.ts) fails the test during which it happened. The controllers run on
// their own macrotasks, so nothing else would see it: Omni would log it and go on, and a test
// could pass on a sim that quietly stopped reconciling. One that happens between two tests fails
// the next one; after the last, the file.

import { afterAll, afterEach } from 'vitest';
import { onControllerFailure, type ControllerError } from '../src/omni-sim/controllers/queue.js';

const failures: ControllerError[] = [];
onControllerFailure((f) => failures.push(f));

/** For a test that causes a controller failure on purpose: the failures so far, taken (not checked). */
export function takeControllerFailures(): ControllerError[] {
  return failures.splice(0);
}

function check(): void {
  if (failures.length === 0) return;
  const all = failures.splice(0);
  throw new AggregateError(
    all,
    `${all.length} error(s) inside the simulated Omni's controllers: ${all.map((f) => f.message).join('; ')}`,
  );
}

afterEach(check);
afterAll(check);
