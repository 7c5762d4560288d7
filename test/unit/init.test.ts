/**
 * `saga init`: the app is written from templates/app/ into a new folder with its placeholders filled
 * in, depends on the package as asked, and a folder that holds anything is refused.
 */
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { initApp, InitError } from '../../src/init';

const ROOT = path.resolve(__dirname, '../..');
const ours = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string; dependencies: Record<string, string>; devDependencies: Record<string, string> };

let scratch: string;
beforeEach(() => {
  scratch = mkdtempSync(path.join(tmpdir(), 'rs-init-'));
});
afterEach(() => rmSync(scratch, { recursive: true, force: true }));

const read = (dir: string, file: string) => readFileSync(path.join(dir, file), 'utf8');
const packageJson = (dir: string) => JSON.parse(read(dir, 'package.json')) as Record<string, Record<string, string>>;

describe('initApp', () => {
  it('writes the app into a new folder, its placeholders filled in', async () => {
    const made = await initApp(path.join(scratch, 'signups'), { name: 'my-signups' });

    expect(made.dir).toBe(path.join(scratch, 'signups'));
    expect(made.files).toEqual(
      expect.arrayContaining(['.gitignore', 'README.md', 'package.json', 'tsconfig.json', 'src/migrate.ts', 'src/sagas.ts', 'src/start.ts', 'src/worker.ts', 'test/signup.test.ts']),
    );
    for (const file of made.files) expect(read(made.dir, file), file).not.toMatch(/\{\{\w+\}\}/);
    expect(read(made.dir, 'README.md')).toMatch(/^# my-signups\n/);
    const pkg = packageJson(made.dir);
    expect(pkg.name).toBe('my-signups');
    expect(pkg.type).toBe('module');
    expect(pkg.scripts).toMatchObject({ test: 'tsc --noEmit && node --import tsx --test test/*.test.ts', worker: 'tsx src/worker.ts', start: 'tsx src/start.ts', migrate: 'tsx src/migrate.ts' });
    expect(pkg['reservation-saga']).toEqual({ sagas: './src/sagas.ts' });
  });

  it('imports the package only by name', async () => {
    const made = await initApp(path.join(scratch, 'app'), {});

    const sources = made.files.filter((f) => f.endsWith('.ts')).map((f) => read(made.dir, f));
    const imported = sources.flatMap((s) => [...s.matchAll(/from '([^']+)'/g)].map((m) => m[1]!));
    const external = [...new Set(imported.filter((m) => !m.startsWith('.') && !m.startsWith('node:')))].sort();
    expect(external).toEqual(['pg', 'reservation-saga', 'reservation-saga/testing', 'reservation-saga/worker', 'zod']);
    // Relative imports stay inside the app (never a path into the package's sources), with the
    // extension an ES module import needs.
    for (const m of imported.filter((m) => m.startsWith('.'))) expect(m).toMatch(/^\.\.?\/(src\/)?[a-z-]+\.js$/);
  });

  it('depends on the spec it is given, and on our versions of the packages we share', async () => {
    const spec = 'file:/tmp/packed dir/reservation-saga-0.1.0.tgz';
    const made = await initApp(path.join(scratch, 'app'), { packageSpec: spec });

    const pkg = packageJson(made.dir);
    expect(pkg.dependencies!['reservation-saga']).toBe(spec);
    expect(pkg.dependencies).toMatchObject({ zod: ours.dependencies.zod, pg: ours.dependencies.pg });
    expect(pkg.devDependencies).toMatchObject({
      tsx: ours.devDependencies.tsx,
      typescript: ours.devDependencies.typescript,
      '@types/node': ours.devDependencies['@types/node'],
      '@types/pg': ours.devDependencies['@types/pg'],
    });
  });

  it('depends on ^<our version> by default, and names the app after its folder', async () => {
    const made = await initApp(path.join(scratch, 'My App'), {});

    const pkg = packageJson(made.dir);
    expect(pkg.dependencies!['reservation-saga']).toBe(`^${ours.version}`);
    expect(pkg.name).toBe('my-app');
  });

  it('depends on the file the project that installed it depends on (a tarball), as an absolute path', async () => {
    // `npm install ../pack/reservation-saga-0.1.0.tgz` in `project`, then `npx reservation-saga init app` there.
    const project = path.join(scratch, 'project');
    mkdirSync(project);
    writeFileSync(path.join(project, 'package.json'), JSON.stringify({ dependencies: { 'reservation-saga': 'file:../pack/reservation-saga-0.1.0.tgz' } }));

    const made = await initApp(path.join(project, 'app'), { installedIn: project });

    expect(packageJson(made.dir).dependencies!['reservation-saga']).toBe(`file:${path.join(scratch, 'pack/reservation-saga-0.1.0.tgz')}`);
  });

  it('depends on ^<our version> when the project that installed it has it from a registry', async () => {
    const project = path.join(scratch, 'project');
    mkdirSync(project);
    writeFileSync(path.join(project, 'package.json'), JSON.stringify({ dependencies: { 'reservation-saga': '^0.1.0' } }));

    const made = await initApp(path.join(scratch, 'app'), { installedIn: project });

    expect(packageJson(made.dir).dependencies!['reservation-saga']).toBe(`^${ours.version}`);
  });

  it('writes into an existing empty folder', async () => {
    const dir = path.join(scratch, 'empty');
    mkdirSync(dir);

    await expect(initApp(dir, {})).resolves.toMatchObject({ dir });
  });

  it('refuses a folder that is not empty, writing nothing', async () => {
    const dir = path.join(scratch, 'taken');
    mkdirSync(dir);
    writeFileSync(path.join(dir, 'package.json'), '{"name":"mine"}');

    const refused = initApp(dir, {});

    await expect(refused).rejects.toBeInstanceOf(InitError);
    await expect(refused).rejects.toThrow(/not empty/);
    expect(readdirSync(dir)).toEqual(['package.json']);
    expect(read(dir, 'package.json')).toBe('{"name":"mine"}');
  });

  it('refuses a path that is a file, and a name npm would refuse', async () => {
    const file = path.join(scratch, 'a-file');
    writeFileSync(file, '');

    await expect(initApp(file, {})).rejects.toBeInstanceOf(InitError);
    await expect(initApp(path.join(scratch, 'app'), { name: 'Not A Name' })).rejects.toThrow(InitError);
  });
});
