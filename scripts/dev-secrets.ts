/**
 * Development secrets: `make dev` and `make demo` keep them in `<data dir>/dev.env` (git-ignored,
 * mode 0600), made once with fresh random bytes, and say so. Only the dev stack reads that file; a
 * deployment sets the variables itself, and a process without them refuses to start.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { generateCodecKey } from '../src/codec/keys';

/** The variables the file holds, each with how a fresh value is made. */
const DEV_SECRETS: Record<string, () => string> = {
  INTENT_KEY_SECRET: () => randomBytes(32).toString('base64'),
  SAGA_CODEC_KEYS: () => generateCodecKey('dev1'),
  // `saga serve`'s one caller in development: client id `dev`, a random bearer token.
  SAGA_SERVE_TOKENS: () => `dev:${randomBytes(24).toString('base64url')}`,
};

/** The variables the file holds. */
export const DEV_SECRET_VARIABLES = Object.keys(DEV_SECRETS);

/** The dev secrets file of `dataDir`. */
export function devSecretsPath(dataDir: string): string {
  return path.join(dataDir, 'dev.env');
}

/** Reads `<dataDir>/dev.env` (NAME=value lines), or undefined when there is none. */
export function readDevSecrets(dataDir: string): Record<string, string> | undefined {
  const file = devSecretsPath(dataDir);
  if (!existsSync(file)) return undefined;
  const entries = readFileSync(file, 'utf8')
    .split('\n')
    .map((line) => /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line.trim()))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => [m[1]!, m[2]!] as const);
  return Object.fromEntries(entries);
}

/** Makes `<dataDir>/dev.env` with every missing secret; returns the secrets and the names it made. */
export function ensureDevSecrets(dataDir: string): { secrets: Record<string, string>; made: string[] } {
  const secrets = readDevSecrets(dataDir) ?? {};
  const made = DEV_SECRET_VARIABLES.filter((name) => !secrets[name]);
  for (const name of made) secrets[name] = DEV_SECRETS[name]!();
  if (made.length > 0) {
    const body = [
      '# Development secrets of this checkout, made by `make dev` / `make demo`. Never use them elsewhere.',
      ...Object.entries(secrets).map(([k, v]) => `${k}=${v}`),
      '',
    ].join('\n');
    writeFileSync(devSecretsPath(dataDir), body, { mode: 0o600 });
  }
  return { secrets, made };
}

/**
 * `env` with the dev secrets filled in where `env` sets none (the environment's own win), and the
 * names of the secrets made now.
 */
export function withDevSecrets(env: NodeJS.ProcessEnv, dataDir: string): { env: NodeJS.ProcessEnv; made: string[] } {
  const { secrets, made } = ensureDevSecrets(dataDir);
  const filled: NodeJS.ProcessEnv = { ...env };
  for (const [name, value] of Object.entries(secrets)) if (!filled[name]) filled[name] = value;
  return { env: filled, made };
}
