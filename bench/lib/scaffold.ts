/**
 * The package as a team gets it, made once per run and shared by the benchmarks that need it: the
 * packed tarball (`npm pack`, whose prepack builds dist/), and a new app made from it (the scaffold
 * that `reservation-saga init` writes, installed with npm). Both live in one temp dir, removed when
 * the run ends. Also what an installed tree weighs: on disk, and by package and what it pulls in.
 */
import { execFile } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { initApp } from '../../src/init';
import { PROJECT_ROOT } from '../../src/paths';
import type { BenchContext } from './rounds';

const run = promisify(execFile);

/** The packed tarball, and how long `npm pack` took (once per run, whichever benchmark asked first). */
export interface Packed {
  tarball: string;
  packMs: number;
}

/** A new app made from the tarball and installed, and how long each part took. */
export interface Scaffold extends Packed {
  dir: string;
  installMs: number;
}

let workDir: string | undefined;
let packed: Promise<Packed> | undefined;
let scaffold: Promise<Scaffold> | undefined;

/** The run's temp dir for the package, removed when the run ends. */
function runDir(ctx: BenchContext): string {
  if (workDir) return workDir;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rs-bench-package-'));
  workDir = dir;
  ctx.onCleanup(async () => {
    rmSync(dir, { recursive: true, force: true });
    workDir = packed = scaffold = undefined;
  });
  return dir;
}

/** The tarball `npm pack` writes from the checkout (once per run: prepack builds dist/). */
export function packedTarball(ctx: BenchContext): Promise<Packed> {
  packed ??= (async () => {
    const dir = path.join(runDir(ctx), 'pack');
    mkdirSync(dir);
    ctx.progress.update('npm pack (prepack builds dist/)');
    const t0 = performance.now();
    await run('npm', ['pack', '--pack-destination', dir], { cwd: PROJECT_ROOT, maxBuffer: 64 * 1024 * 1024 });
    const packMs = performance.now() - t0;
    return { tarball: path.join(dir, readdirSync(dir).find((f) => f.endsWith('.tgz'))!), packMs };
  })();
  return packed;
}

/**
 * A new app as `reservation-saga init my-app` writes it (the checkout's templates/app, which the
 * tarball holds too), depending on the tarball, installed with `npm install` (from npm's cache where
 * it holds the packages: `--prefer-offline`), once per run.
 */
export function installedScaffold(ctx: BenchContext): Promise<Scaffold> {
  scaffold ??= (async () => {
    const { tarball, packMs } = await packedTarball(ctx);
    const dir = path.join(runDir(ctx), 'my-app');
    await initApp(dir, { packageSpec: `file:${tarball}` });
    ctx.progress.update('the scaffold: npm install (the tarball and its dependencies)');
    const t0 = performance.now();
    await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir, maxBuffer: 64 * 1024 * 1024 });
    return { dir, tarball, packMs, installMs: performance.now() - t0 };
  })();
  return scaffold;
}

/**
 * Bytes on disk under `target` as `du` counts them: allocated blocks, directories included, symlinks
 * not followed, a file with several hard links once (esbuild links its binary into two packages) per
 * `seen`; `skip` names entries of `target` itself left out.
 */
export function diskBytes(target: string, skip: readonly string[] = [], seen = new Set<string>()): number {
  const stat = lstatSync(target);
  if (stat.nlink > 1 && !stat.isDirectory()) {
    const inode = `${stat.dev}:${stat.ino}`;
    if (seen.has(inode)) return 0;
    seen.add(inode);
  }
  let total = stat.blocks * 512;
  if (!stat.isDirectory()) return total;
  for (const entry of readdirSync(target)) {
    if (!skip.includes(entry)) total += diskBytes(path.join(target, entry), [], seen);
  }
  return total;
}

/** One package of an installed tree, as its package-lock.json lists it. */
interface LockedPackage {
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  devDependencies?: Record<string, string>;
}

/** An installed tree (an app's node_modules), weighed package by package. */
export class InstalledTree {
  /** The lockfile's packages by path (`node_modules/a/node_modules/b`) that are installed; '' is the app. */
  readonly #packages: Record<string, LockedPackage>;
  /** Bytes of each package's own files (its nested node_modules left out: those are packages of their own). */
  readonly #own = new Map<string, number>();
  /** Bytes of the whole node_modules, as `du -s` counts them. */
  readonly totalBytes: number;

  constructor(readonly appDir: string) {
    const locked = (JSON.parse(readFileSync(path.join(appDir, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockedPackage> }).packages;
    // Installed ones only: the lockfile also lists other platforms' optional packages (@esbuild/aix-ppc64).
    this.#packages = Object.fromEntries(Object.entries(locked).filter(([location]) => location === '' || existsSync(path.join(appDir, location))));
    const seen = new Set<string>();
    for (const location of Object.keys(this.#packages)) {
      if (location !== '') this.#own.set(location, diskBytes(path.join(appDir, location), ['node_modules'], seen));
    }
    this.totalBytes = diskBytes(path.join(appDir, 'node_modules'));
  }

  /** Packages installed (every copy, nested ones included). */
  get packageCount(): number {
    return this.#own.size;
  }

  /** Entries of node_modules itself, a scope (`@temporalio`) as one, as `ls node_modules` shows them. */
  get topLevelEntries(): number {
    return readdirSync(path.join(this.appDir, 'node_modules')).filter((e) => !e.startsWith('.')).length;
  }

  /** Bytes of the packages whose name starts with `prefix` (e.g. `@opentelemetry/`), every copy. */
  bytesNamed(prefix: string): number {
    let total = 0;
    for (const [location, bytes] of this.#own) if (location.slice(location.lastIndexOf('node_modules/') + 'node_modules/'.length).startsWith(prefix)) total += bytes;
    return total;
  }

  /**
   * The packages `names` need (dependencies of the app's dependencies named, theirs, and so on:
   * dependencies, optional ones and required peers, each resolved as Node resolves it), their count
   * and bytes.
   */
  closure(names: readonly string[]): { packages: number; bytes: number } {
    const seen = new Set<string>();
    const stack = names.map((name) => this.#resolve('', name)).filter((l): l is string => l !== undefined);
    while (stack.length > 0) {
      const location = stack.pop()!;
      if (seen.has(location)) continue;
      seen.add(location);
      const info = this.#packages[location] ?? {};
      const peers = Object.keys(info.peerDependencies ?? {}).filter((name) => !info.peerDependenciesMeta?.[name]?.optional);
      for (const name of [...Object.keys(info.dependencies ?? {}), ...Object.keys(info.optionalDependencies ?? {}), ...peers]) {
        const found = this.#resolve(location, name);
        if (found !== undefined) stack.push(found);
      }
    }
    return { packages: seen.size, bytes: [...seen].reduce((sum, l) => sum + (this.#own.get(l) ?? 0), 0) };
  }

  /** The app's own dependencies of `field`. */
  appDependencies(field: 'dependencies' | 'devDependencies'): string[] {
    return Object.keys(this.#packages['']?.[field] ?? {});
  }

  /** Where `name` required from the package at `from` is found: its node_modules, then each one above. */
  #resolve(from: string, name: string): string | undefined {
    for (let dir = from; ; ) {
      const candidate = dir ? `${dir}/node_modules/${name}` : `node_modules/${name}`;
      if (candidate in this.#packages) return candidate;
      if (!dir) return undefined;
      const up = dir.lastIndexOf('/node_modules/');
      dir = up >= 0 ? dir.slice(0, up) : '';
    }
  }
}

/** Bytes as MB the way `du -h` counts them (MiB). */
export function megabytes(bytes: number): number {
  return bytes / (1024 * 1024);
}
