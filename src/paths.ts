/** Where the project's non-code files (lua/, migrations/, dist/) are, from sources or from dist/. */
import { existsSync } from 'node:fs';
import path from 'node:path';

function findRoot(start: string): string {
  for (let dir = start; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json')) && existsSync(path.join(dir, 'migrations'))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no project root above ${start}`);
  }
}

/** The folder holding package.json, lua/ and migrations/. */
export const PROJECT_ROOT = findRoot(__dirname);
