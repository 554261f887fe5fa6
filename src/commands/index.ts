// Every command of the CLI, one module each. main.ts registers them in this order.

import type { CommandModule } from 'yargs';
import { demoCommand } from './demo.js';
import { planCommand } from './plan.js';
import { runCommand } from './run.js';
import { simCommand } from './sim.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const commands: CommandModule<any, any>[] = [runCommand, planCommand, simCommand, demoCommand];
