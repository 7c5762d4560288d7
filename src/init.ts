/**
 * `saga init <dir>`: writes a minimal app that uses the package by name (one saga type, its table's
 * migration, a worker, a start script, a test against the local services, a README), copied from
 * templates/app/ with `{{name}}` and `{{packageSpec}}` filled in. It writes only into a new or empty
 * folder, and never overwrites a file.
 */
import { spawn } from 'node:child_process';
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from './paths';

/** The app's template: plain files, copied with their placeholders filled in. */
export const APP_TEMPLATE_DIR = path.join(PROJECT_ROOT, 'templates', 'app');

/**
 * Template files stored under another name: npm drops a `.gitignore` from a package, and a
 * `tsconfig.json` in the checkout would become the project of the template's sources for our lint.
 */
const RENAMED: Readonly<Record<string, string>> = { gitignore: '.gitignore', tsconfig: 'tsconfig.json' };

/** An npm package name (lower case, optionally scoped), as npm accepts it for a new package. */
const PACKAGE_NAME = /^(?:@[a-z0-9-~][a-z0-9-._~]*\/)?[a-z0-9-~][a-z0-9-._~]*$/;

/** The app could not be written; the message says why, and nothing was overwritten. */
export class InitError extends Error {
  override readonly name = 'InitError';
  constructor(
    message: string,
    /** The folder asked for, resolved. */
    readonly dir: string,
  ) {
    super(message);
  }
}

/** What {@link initApp} writes. */
export interface InitOptions {
  /** The app's package name. @default the folder's name, made a valid package name */
  name?: string;
  /**
   * What the app's package.json depends on for `reservation-saga`: a version range, or a tarball
   * (`file:/abs/path/reservation-saga-0.1.0.tgz`). @default what the project that installed this
   * package depends on it by, when that is a file (see {@link fileSpecIn}); else `^<this package's version>`
   */
  packageSpec?: string;
  /** The project whose node_modules holds this package. @default found from where this package is */
  installedIn?: string;
}

/**
 * Writes the app into `dir` (made when missing); returns the folder and the files written, relative
 * to it, sorted.
 * @throws InitError when `dir` is a file or a folder that is not empty, or an option is malformed.
 */
export async function initApp(dir: string, options: InitOptions = {}): Promise<{ dir: string; files: string[] }> {
  const target = path.resolve(dir);
  const own = ownPackage();
  const name = options.name ?? defaultName(target);
  if (name.length > 214 || !PACKAGE_NAME.test(name)) {
    throw new InitError(`${JSON.stringify(name)} is not a valid package name (lower-case letters, digits, - . _ ~, optionally @scope/): pass one with --name`, target);
  }
  const installedIn = options.installedIn ?? installingProject();
  const packageSpec = options.packageSpec ?? (installedIn === undefined ? undefined : fileSpecIn(installedIn, own.name)) ?? `^${own.version}`;
  if (packageSpec.trim() === '' || [...packageSpec].some((c) => c.charCodeAt(0) < 0x20)) throw new InitError(`package spec ${JSON.stringify(packageSpec)} is empty or holds control characters`, target);

  await refuseNonEmpty(target);
  const templates = await listFiles(APP_TEMPLATE_DIR).catch((err: NodeJS.ErrnoException) => {
    throw new InitError(`the app template is missing (${APP_TEMPLATE_DIR}: ${err.code ?? err.message}): reinstall reservation-saga`, target);
  });
  const values: Record<string, string> = { name, packageSpec };
  const files: string[] = [];
  for (const template of templates) {
    const parts = template.split('/');
    const file = [...parts.slice(0, -1), RENAMED[parts.at(-1)!] ?? parts.at(-1)!].join('/');
    let text = fill(await readFile(path.join(APP_TEMPLATE_DIR, template), 'utf8'), values, template.endsWith('.json'));
    if (file === 'package.json') text = pinDependencies(text, own);
    await mkdir(path.join(target, path.dirname(file)), { recursive: true });
    try {
      // `wx`: fails rather than overwrite a file that appeared since the folder was checked.
      await writeFile(path.join(target, file), text, { flag: 'wx' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new InitError(`${path.join(target, file)} exists already: not overwritten`, target);
      throw err;
    }
    files.push(file);
  }
  return { dir: target, files: files.sort() };
}

/** The project whose node_modules holds this package; undefined in a checkout. */
function installingProject(): string | undefined {
  const modules = path.dirname(PROJECT_ROOT);
  return path.basename(modules) === 'node_modules' ? path.dirname(modules) : undefined;
}

/**
 * What `project` depends on package `name` by, when that is a file (a packed tarball, a folder), as
 * an absolute `file:` spec: an app made from it gets the same package, where `^<version>` would ask
 * a registry that may not hold it (`npm install ./reservation-saga-0.1.0.tgz`, then `npx
 * reservation-saga init my-app`). Undefined for a registry range, or when it names none.
 */
export function fileSpecIn(project: string, name: string): string | undefined {
  let manifest: OwnPackage;
  try {
    manifest = JSON.parse(readFileSync(path.join(project, 'package.json'), 'utf8')) as OwnPackage;
  } catch {
    return undefined;
  }
  const spec = manifest.dependencies?.[name] ?? manifest.devDependencies?.[name];
  if (typeof spec !== 'string' || !spec.startsWith('file:')) return undefined;
  return `file:${path.resolve(project, spec.slice('file:'.length))}`;
}

/**
 * Installs the app's dependencies (`npm install` in `dir`, its output on this process's), so that
 * `npm test` runs next. @throws InitError when npm fails or cannot be run: the app is written.
 */
export async function installApp(dir: string): Promise<void> {
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const code = await new Promise<number | null>((resolve, reject) => {
    const child = spawn(npm, ['install', '--no-audit', '--no-fund'], { cwd: dir, stdio: 'inherit' });
    child.once('error', reject);
    child.once('exit', resolve);
  }).catch((err: Error) => {
    throw new InitError(`the app is written, but npm could not be run (${err.message}): run npm install in ${dir}`, dir);
  });
  if (code !== 0) throw new InitError(`the app is written, but npm install failed (exit ${code}): see above, then run npm install in ${dir}`, dir);
}

/** The folder's name as a package name: lower case, other characters as `-`. */
function defaultName(dir: string): string {
  const name = path
    .basename(dir)
    .toLowerCase()
    .replace(/[^a-z0-9-._~]+/g, '-')
    .replace(/^[-._]+|-+$/g, '');
  return name || 'saga-app';
}

async function refuseNonEmpty(target: string): Promise<void> {
  const found = await stat(target).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  if (!found) return;
  if (!found.isDirectory()) throw new InitError(`${target} exists and is not a folder`, target);
  const entries = await readdir(target);
  if (entries.length > 0) throw new InitError(`${target} is not empty (${entries.length} entr${entries.length === 1 ? 'y' : 'ies'}): give a new or empty folder`, target);
}

/** Every file under `root`, relative to it with `/` separators, sorted. */
async function listFiles(root: string, under = ''): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(path.join(root, under), { withFileTypes: true })) {
    const rel = under ? `${under}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...(await listFiles(root, rel)));
    else if (entry.isFile()) out.push(rel);
  }
  return out.sort();
}

/** `text` with each `{{key}}` replaced by its value (escaped as a JSON string's content in a .json file). */
function fill(text: string, values: Record<string, string>, json: boolean): string {
  return text.replace(/\{\{(\w+)\}\}/g, (whole, key: string) => {
    const value = values[key];
    if (value === undefined) return whole;
    return json ? JSON.stringify(value).slice(1, -1) : value;
  });
}

interface OwnPackage {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

function ownPackage(): OwnPackage {
  return JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as OwnPackage;
}

/** The app's dependencies that this package also has, at this package's versions (so the two agree). */
function pinDependencies(text: string, own: OwnPackage): string {
  const app = JSON.parse(text) as Record<string, unknown>;
  const ours = { ...own.devDependencies, ...own.dependencies };
  for (const field of ['dependencies', 'devDependencies']) {
    const deps = app[field] as Record<string, string> | undefined;
    for (const dep of Object.keys(deps ?? {})) {
      if (dep !== 'reservation-saga' && ours[dep]) deps![dep] = ours[dep];
    }
  }
  return `${JSON.stringify(app, null, 2)}\n`;
}
