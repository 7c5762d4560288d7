/**
 * Where the saga CLI and `npm run worker` find an app's saga types: the module named by `--sagas`,
 * else by SAGA_TYPES_MODULE, else by the field `"reservation-saga": { "sagas": "…" }` of the nearest
 * package.json above the working directory. The module exports `sagas`: a list (or an object) of
 * declarations, or a function of the config that returns one.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Config } from '../config';
import { sagaTypesOf, type SagaList } from './define';
import type { SagaTypes } from './index';

/** The app's saga types could not be found or loaded; the message says where they were looked for. */
export class SagaModuleError extends Error {
  override readonly name = 'SagaModuleError';
}

/** Where the saga types were named, and the module's path. */
export interface SagaModuleLocation {
  path: string;
  /** `--sagas`, `SAGA_TYPES_MODULE` or the package.json that names it. */
  namedBy: string;
}

const HOW = 'name the module that exports your saga types with --sagas <module>, SAGA_TYPES_MODULE, or "reservation-saga": { "sagas": "./dist/sagas.js" } in your package.json';

/** The module the app names, or a SagaModuleError saying how to name one. */
export function locateSagaModule(options: { flag?: string; env?: NodeJS.ProcessEnv; cwd?: string } = {}): SagaModuleLocation {
  const cwd = options.cwd ?? process.cwd();
  const env = options.env ?? process.env;
  if (options.flag) return { path: path.resolve(cwd, options.flag), namedBy: '--sagas' };
  if (env.SAGA_TYPES_MODULE) return { path: path.resolve(cwd, env.SAGA_TYPES_MODULE), namedBy: 'SAGA_TYPES_MODULE' };
  for (let dir = cwd; ; dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    if (existsSync(file)) {
      let field: unknown;
      try {
        field = (JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>)['reservation-saga'];
      } catch (err) {
        throw new SagaModuleError(`${file} is not valid JSON (${(err as Error).message})`);
      }
      const sagas = typeof field === 'object' && field !== null ? (field as Record<string, unknown>).sagas : undefined;
      if (typeof sagas === 'string' && sagas !== '') return { path: path.resolve(dir, sagas), namedBy: file };
      if (field !== undefined) throw new SagaModuleError(`${file}: "reservation-saga".sagas must be the path of a module; ${HOW}`);
      break;
    }
    if (path.dirname(dir) === dir) break;
  }
  throw new SagaModuleError(`no saga types named: ${HOW}`);
}

/**
 * Imports the module at `location` and returns its saga types under `config`. A TypeScript module is
 * loaded through tsx when tsx is installed beside the app (or running already).
 * @throws SagaModuleError when the module is missing, fails to load, or exports no saga types.
 */
export async function loadSagaModule(location: SagaModuleLocation, config: Config): Promise<SagaTypes> {
  const where = `${location.path} (named by ${location.namedBy})`;
  if (!existsSync(location.path)) throw new SagaModuleError(`saga types module ${where} does not exist; ${HOW}`);
  let mod: Record<string, unknown>;
  try {
    mod = (await importModule(location.path)) as Record<string, unknown>;
  } catch (err) {
    if (err instanceof SagaModuleError) throw err;
    throw new SagaModuleError(`saga types module ${where} failed to load: ${(err as Error).message}`);
  }
  // ESM `export const sagas`, CommonJS `exports.sagas` (default.sagas through import()), or a default export of the list.
  const fallback = Array.isArray(mod.default) || typeof mod.default === 'function' ? mod.default : undefined;
  const exported = mod.sagas ?? (mod.default as Record<string, unknown> | undefined)?.sagas ?? fallback;
  if (exported === undefined) throw new SagaModuleError(`saga types module ${where} exports no \`sagas\` (a list of defineSaga/defineOperation declarations, or a function of the config returning one)`);
  const list = typeof exported === 'function' ? await (exported as (config: Config) => SagaList | Promise<SagaList>)(config) : (exported as SagaList);
  try {
    return sagaTypesOf(list);
  } catch (err) {
    throw new SagaModuleError(`saga types module ${where}: ${(err as Error).message}`);
  }
}

const TYPESCRIPT = /\.[cm]?tsx?$/;

async function importModule(file: string): Promise<unknown> {
  if (!TYPESCRIPT.test(file) || hasTsxLoader()) return import(pathToFileURL(file).href);
  // A TypeScript module outside tsx: register the app's tsx (or ours, in a development checkout) for
  // CommonJS, then require it. tsx before Node's own type stripping (Node 22.18 and later): that one
  // resolves no import without its extension (`./order`), as TypeScript apps write them.
  const appRequire = createRequire(file);
  let api: { register: () => unknown } | undefined;
  try {
    api = appRequire('tsx/cjs/api') as { register: () => unknown };
  } catch {
    api = undefined;
  }
  if (api) {
    api.register();
    return appRequire(file);
  }
  if ((process.features as { typescript?: unknown }).typescript) return import(pathToFileURL(file).href);
  throw new SagaModuleError(`saga types module ${file} is TypeScript: install tsx beside it (npm install --save-dev tsx) or name the compiled .js`);
}

/** Whether this process runs under tsx (which then loads TypeScript modules itself). */
function hasTsxLoader(): boolean {
  return [...process.execArgv, process.env.NODE_OPTIONS ?? ''].some((arg) => /\btsx\b/.test(arg)) || /[\\/]tsx[\\/]/.test(process.argv[1] ?? '');
}
