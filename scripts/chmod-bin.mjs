// tsc does not keep the executable bit; npm sets it on install, but `node dist/...` and tests
// that spawn the file directly need it in the work tree too.
import { chmodSync, existsSync } from 'node:fs';

const bin = new URL('../dist/src/main.js', import.meta.url);
if (existsSync(bin)) chmodSync(bin, 0o755);
