/**
 * One typed configuration for the worker, the client and the CLI, read from the environment and
 * validated once. Workflows never read it: they receive the values they need as arguments.
 */
import { z } from 'zod';
import { CodecKeyError, parseCodecKeys, type CodecKeys } from './codec/keys';

/** Thrown when the environment holds a value the project cannot run with. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  /** The environment variable at fault (the first one, when several are). */
  readonly variable: string;
  constructor(variable: string, message: string) {
    super(`${variable}: ${message}`);
    this.variable = variable;
  }
}

const MAX_LEASE_MS = 24 * 60 * 60 * 1000;

const wholeMs = (max: number) => z.coerce.number().int('must be a whole number of milliseconds').positive('must be > 0').max(max);

const positiveMs = (fallback: number, max = MAX_LEASE_MS) => wholeMs(max).default(fallback);

/** A duration whose default depends on another variable's (filled in by loadConfig). */
const optionalPositiveMs = wholeMs(MAX_LEASE_MS).optional();

/** PICKUP_LEASE_MS when unset, unless LEASE_MS is longer: 5 minutes. */
export const DEFAULT_PICKUP_LEASE_MS = 300_000;

const url = (protocols: readonly string[], fallback: string) =>
  z
    .string()
    .default(fallback)
    .refine((value) => {
      try {
        return protocols.includes(new URL(value).protocol);
      } catch {
        return false;
      }
    }, `must be a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}`);

const optionalText = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v));

const flag = z
  .enum(['', 'true', 'false', '1', '0', 'yes', 'no'], { message: 'must be true or false' })
  .default('')
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

/**
 * Every environment variable the project reads, with its default. The configuration table of docs/configuration.md
 * lists the same names; a unit test keeps the two in step.
 */
const envSchema = z.object({
  /** Temporal frontend gRPC address. @default 127.0.0.1:7233 */
  TEMPORAL_ADDRESS: z
    .string()
    .default('127.0.0.1:7233')
    .refine((v) => /^[^\s:/]+:\d{1,5}$/.test(v), 'must be host:port'),
  /** Temporal namespace. @default default */
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  /** Task queue the worker polls and the client starts sagas on. @default reservation-saga */
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('reservation-saga'),
  /** Use TLS to reach Temporal (implied by a client certificate or an API key). @default false */
  TEMPORAL_TLS: flag,
  /** Client certificate (PEM file) for mTLS, e.g. Temporal Cloud. */
  TEMPORAL_TLS_CERT_PATH: optionalText,
  /** Client private key (PEM file) for mTLS. */
  TEMPORAL_TLS_KEY_PATH: optionalText,
  /** CA bundle (PEM file) to verify the server, when not a public CA. */
  TEMPORAL_TLS_CA_PATH: optionalText,
  /** Server name to verify in the server certificate, when it differs from the address. */
  TEMPORAL_TLS_SERVER_NAME: optionalText,
  /** API key for Temporal Cloud (sent as a bearer token; implies TLS). */
  TEMPORAL_API_KEY: optionalText,
  /** Base URL of the Temporal Web UI, used to print links to sagas. @default http://127.0.0.1:8233 */
  TEMPORAL_UI_URL: url(['http:', 'https:'], 'http://127.0.0.1:8233'),
  /** Redis for the RMS (single instance). @default redis://127.0.0.1:6379 */
  REDIS_URL: url(['redis:', 'rediss:'], 'redis://127.0.0.1:6379'),
  /** Comma-separated host:port seed nodes; when set, the RMS talks to a Redis Cluster instead of REDIS_URL. */
  REDIS_CLUSTER_NODES: optionalText.refine(
    (v) => v === undefined || v.split(',').every((n) => /^[^\s:/]+:\d{1,5}$/.test(n.trim())),
    'must be a comma-separated list of host:port',
  ),
  /** Prefix of every RMS key; isolates tenants and test runs. @default rs: */
  REDIS_KEY_PREFIX: z
    .string()
    .default('rs:')
    .refine((v) => /^[A-Za-z0-9_:.-]{0,64}$/.test(v), 'may hold only letters, digits and _ : . - (64 at most)'),
  /** Time limit of one Redis command before the RMS reports Redis unavailable. @default 2000 */
  REDIS_COMMAND_TIMEOUT_MS: positiveMs(2000, 60_000),
  /** PostgreSQL, the source of truth. @default postgres://postgres@127.0.0.1:5432/reservation_saga */
  DATABASE_URL: url(['postgres:', 'postgresql:'], 'postgres://postgres@127.0.0.1:5432/reservation_saga'),
  /** Connections in the pool of each process. @default 10 */
  DB_POOL_MAX: z.coerce.number().int().min(1).max(1000).default(10),
  /** Statement timeout of every pooled connection. @default 30000 */
  DB_STATEMENT_TIMEOUT_MS: positiveMs(30_000),
  /** Time limit for opening a connection. @default 5000 */
  DB_CONNECT_TIMEOUT_MS: positiveMs(5_000, 600_000),
  /**
   * A transaction idle this long (its process paused, hung, or gone quiet between statements) is
   * ended by PostgreSQL and rolled back (`idle_in_transaction_session_timeout`): the longest a step's
   * compensation waits for a stalled attempt of that step, so at most 50000 (below the 60 s a
   * compensation attempt may take). @default 30000
   */
  DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: positiveMs(30_000, 50_000),
  /** Lease of a reservation; extended by every heartbeat of the fenced write. @default 30000 */
  LEASE_MS: positiveMs(30_000),
  /**
   * The lease the gate takes for a saga it answers SUCCESS, held until a worker runs the saga's
   * write (whose heartbeats then keep LEASE_MS): while no worker has picked the saga up (every worker
   * down, a deploy, a crash loop), no other request for its intent is told SUCCESS, only CONFLICT.
   * Past it the saga may lose its intent to another request and end REJECTED (see docs/http.md).
   * At least LEASE_MS. @default 300000 (5 minutes), or LEASE_MS when that is longer
   */
  PICKUP_LEASE_MS: optionalPositiveMs,
  /** How often the fenced write heartbeats (and so extends the lease). @default 5000 */
  HEARTBEAT_INTERVAL_MS: positiveMs(5_000),
  /** Temporal heartbeat timeout of the fenced write. @default 15000 */
  HEARTBEAT_TIMEOUT_MS: positiveMs(15_000),
  /**
   * How long a step's idempotency record is kept after its last update; the schedule made at worker
   * start purges older ones every hour, except those of sagas that still run (the purge asks
   * Temporal which do): a saga may wait longer than any retention. @default 604800000 (7 days)
   */
  IDEMPOTENCY_RETENTION_MS: positiveMs(604_800_000, 366 * 24 * 3600 * 1000).refine((v) => v >= 3_600_000, 'must be at least an hour (3600000)'),
  /**
   * How long an `entity_exists` marker lives in Redis, 0 for ever. A duplicate within it is answered
   * by Redis alone; a later one by the PostgreSQL truth check (one point lookup), which writes the
   * marker again. @default 86400000 (a day)
   */
  ENTITY_EXISTS_TTL_MS: z.coerce.number().int('must be a whole number of milliseconds').min(0, 'must be ≥ 0 (0: no expiry)').max(366 * 24 * 3600 * 1000).default(86_400_000),
  /**
   * Run the saga types with their test knobs (`simulate` in an order: a long write, slow steps).
   * Only tests and the demo turn it on; in production an order with `simulate` is refused. @default false
   */
  SAGA_SIMULATIONS: flag,
  /**
   * The secret of the intent keys (HMAC-SHA-256), base64 of at least 32 random bytes (`openssl rand
   * -base64 32`); the same on every client and worker. Required by every process that reserves or
   * plans sagas; never logged. Changing it starts a new key space (see "Rotating INTENT_KEY_SECRET" in docs/configuration.md).
   */
  INTENT_KEY_SECRET: optionalText,
  /**
   * The payload codec's keys: `<id>:<base64 of 32 random bytes>`, comma-separated, newest first (it
   * encrypts; every key listed decrypts). Required by every worker, client and the CLI: nothing is
   * ever sent to Temporal in clear. Never logged.
   */
  SAGA_CODEC_KEYS: optionalText,
  /** Where `saga codec-server` listens (host:port). @default 127.0.0.1:8234 */
  CODEC_SERVER_ADDRESS: z
    .string()
    .default('127.0.0.1:8234')
    .refine((v) => /^[^\s:/]+:\d{1,5}$/.test(v), 'must be host:port'),
  /** Bearer token the codec server requires (`Authorization: Bearer <token>`); none when unset. */
  CODEC_SERVER_TOKEN: optionalText,
  /** Comma-separated origins of the Temporal UIs that may call the codec server. @default the origin of TEMPORAL_UI_URL */
  CODEC_SERVER_CORS_ORIGINS: optionalText,
  /** Where `saga serve` (the HTTP API) listens (host:port; port 0 picks a free one). @default 127.0.0.1:8236 */
  SAGA_SERVE_ADDRESS: z
    .string()
    .default('127.0.0.1:8236')
    .refine((v) => /^[^\s:/]+:\d{1,5}$/.test(v), 'must be host:port'),
  /**
   * The HTTP API's callers: `<client id>:<bearer token>`, comma-separated, one per client. A client id
   * is 1-32 letters, digits or _ (it names the client's idempotency-key namespace); a token is 16 or
   * more printable ASCII characters without spaces or commas. Required by `saga serve`; never logged.
   */
  SAGA_SERVE_TOKENS: optionalText,
  /** Largest request body `saga serve` reads; larger ones get 413. @default 65536 */
  SAGA_SERVE_BODY_LIMIT_BYTES: z.coerce.number().int('must be a whole number of bytes').min(1024, 'must be at least 1024').max(1024 * 1024, 'must be at most 1048576').default(64 * 1024),
  /** Largest request head (request line and headers) `saga serve` reads; larger ones get 431. @default 8192 */
  SAGA_SERVE_MAX_HEADER_BYTES: z.coerce.number().int('must be a whole number of bytes').min(1024, 'must be at least 1024').max(64 * 1024, 'must be at most 65536').default(8 * 1024),
  /** Deadline of one `saga serve` request, from its arrival to its answer; past it, 503. @default 10000 */
  SAGA_SERVE_REQUEST_TIMEOUT_MS: positiveMs(10_000, 600_000),
  /**
   * Where this process serves its own Prometheus metrics on `GET /metrics` (host:port; port 0 picks a
   * free one): the worker and `saga serve` each on their own. Off when unset.
   */
  METRICS_ADDRESS: optionalText.refine((v) => v === undefined || /^[^\s:/]+:\d{1,5}$/.test(v), 'must be host:port'),
  /**
   * Where the worker's Temporal SDK runtime serves its own metrics (polls, task latencies, slots) on
   * `GET /metrics` (host:port). Off when unset.
   */
  TEMPORAL_METRICS_ADDRESS: optionalText.refine((v) => v === undefined || /^[^\s:/]+:\d{1,5}$/.test(v), 'must be host:port'),
  /** Lowest level the worker and `saga serve` log (JSON lines on standard output). @default INFO */
  LOG_LEVEL: z
    .string()
    .default('INFO')
    .transform((v) => v.toUpperCase())
    .pipe(z.enum(['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'], { message: 'must be one of TRACE, DEBUG, INFO, WARN, ERROR' })),
});

/** Variables whose values are secrets: a message about them never shows the value. */
const SECRET_VARIABLES: ReadonlySet<string> = new Set(['INTENT_KEY_SECRET', 'SAGA_CODEC_KEYS', 'CODEC_SERVER_TOKEN', 'SAGA_SERVE_TOKENS']);

/** The validated configuration. */
export interface Config {
  temporal: {
    address: string;
    namespace: string;
    taskQueue: string;
    /** TLS settings, or undefined for a plain connection (the local dev server). */
    tls?: { certPath?: string; keyPath?: string; caPath?: string; serverName?: string };
    apiKey?: string;
    uiUrl: string;
  };
  redis: { url: string; clusterNodes?: { host: string; port: number }[]; keyPrefix: string; commandTimeoutMs: number };
  db: { url: string; poolMax: number; statementTimeoutMs: number; connectTimeoutMs: number; idleInTransactionTimeoutMs: number };
  saga: { leaseMs: number; heartbeatIntervalMs: number; heartbeatTimeoutMs: number };
  /** The gate's lease while a saga waits for a worker (PICKUP_LEASE_MS): at least `saga.leaseMs`. */
  pickupLeaseMs: number;
  /** TTL of the `entity_exists` markers; undefined: none (ENTITY_EXISTS_TTL_MS=0). */
  entityExistsTtlMs?: number;
  /** Retention of the step idempotency records (IDEMPOTENCY_RETENTION_MS). */
  idempotencyRetentionMs: number;
  /**
   * Whether workers and clients run the saga types with their test knobs (`sagaTypesFor` in
   * src/sagas); only tests and the demo turn it on. Must be the same for the workers and the clients
   * of one task queue.
   */
  simulations: boolean;
  /** Secrets, when set (see {@link requireIntentSecret} and {@link requireCodecKeys}). */
  secrets: { intentKey?: Buffer; codecKeys?: CodecKeys; codecKeysText?: string };
  /** `saga codec-server`: where it listens, its token, the UI origins it answers. */
  codecServer: { host: string; port: number; token?: string; corsOrigins: string[] };
  /**
   * `saga serve`: where it listens, its callers (client id and bearer token each; empty when
   * SAGA_SERVE_TOKENS is unset), its body and header limits, the deadline of a request.
   */
  serve: { host: string; port: number; clients: { id: string; token: string }[]; bodyLimitBytes: number; maxHeaderBytes: number; requestTimeoutMs: number };
  /**
   * Metrics and logs: where this process serves its metrics (METRICS_ADDRESS; none when unset), where
   * the worker's Temporal runtime serves its own (TEMPORAL_METRICS_ADDRESS), and the log level.
   */
  observability: { metrics?: { host: string; port: number }; temporalMetricsAddress?: string; logLevel: 'TRACE' | 'DEBUG' | 'INFO' | 'WARN' | 'ERROR' };
}

/** The names of every environment variable read by {@link loadConfig}. */
export const CONFIG_VARIABLES = Object.keys(envSchema.shape) as (keyof typeof envSchema.shape)[];

/**
 * Reads and validates the configuration.
 * @throws ConfigError naming the first variable at fault.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const picked = Object.fromEntries(CONFIG_VARIABLES.map((k) => [k, env[k] === '' ? undefined : env[k]]));
  const parsed = envSchema.safeParse(picked);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const variable = String(issue.path[0] ?? 'environment');
    const shown = SECRET_VARIABLES.has(variable) ? 'a value not shown' : JSON.stringify(redact(env[variable] ?? ''));
    throw new ConfigError(variable, `${issue.message} (got ${shown})`);
  }
  const e = parsed.data;
  const intentSecret = e.INTENT_KEY_SECRET === undefined ? undefined : decodeSecret('INTENT_KEY_SECRET', e.INTENT_KEY_SECRET, 32);
  let codecKeys: CodecKeys | undefined;
  if (e.SAGA_CODEC_KEYS !== undefined) {
    try {
      codecKeys = parseCodecKeys(e.SAGA_CODEC_KEYS, 'SAGA_CODEC_KEYS');
    } catch (err) {
      if (err instanceof CodecKeyError) throw new ConfigError('SAGA_CODEC_KEYS', err.message.replace(/^SAGA_CODEC_KEYS:?\s*/, ''));
      throw err;
    }
  }
  const [codecHost, codecPort] = e.CODEC_SERVER_ADDRESS.split(':') as [string, string];
  const [serveHost, servePort] = e.SAGA_SERVE_ADDRESS.split(':') as [string, string];
  const serveClients = e.SAGA_SERVE_TOKENS === undefined ? [] : parseServeTokens(e.SAGA_SERVE_TOKENS);
  const [metricsHost, metricsPort] = (e.METRICS_ADDRESS?.split(':') ?? []) as [string?, string?];

  // The lease must outlive a missed beat: beat < heartbeat timeout < lease.
  if (!(e.HEARTBEAT_INTERVAL_MS < e.HEARTBEAT_TIMEOUT_MS)) {
    throw new ConfigError('HEARTBEAT_INTERVAL_MS', `must be below HEARTBEAT_TIMEOUT_MS (${e.HEARTBEAT_TIMEOUT_MS})`);
  }
  if (!(e.HEARTBEAT_TIMEOUT_MS < e.LEASE_MS)) {
    throw new ConfigError('HEARTBEAT_TIMEOUT_MS', `must be below LEASE_MS (${e.LEASE_MS})`);
  }
  if (e.PICKUP_LEASE_MS !== undefined && e.PICKUP_LEASE_MS < e.LEASE_MS) {
    throw new ConfigError('PICKUP_LEASE_MS', `must be at least LEASE_MS (${e.LEASE_MS})`);
  }
  if ((e.TEMPORAL_TLS_CERT_PATH === undefined) !== (e.TEMPORAL_TLS_KEY_PATH === undefined)) {
    throw new ConfigError('TEMPORAL_TLS_CERT_PATH', 'TEMPORAL_TLS_CERT_PATH and TEMPORAL_TLS_KEY_PATH go together');
  }

  const useTls = e.TEMPORAL_TLS || e.TEMPORAL_TLS_CERT_PATH !== undefined || e.TEMPORAL_API_KEY !== undefined;
  return {
    temporal: {
      address: e.TEMPORAL_ADDRESS,
      namespace: e.TEMPORAL_NAMESPACE,
      taskQueue: e.TEMPORAL_TASK_QUEUE,
      tls: useTls
        ? {
            certPath: e.TEMPORAL_TLS_CERT_PATH,
            keyPath: e.TEMPORAL_TLS_KEY_PATH,
            caPath: e.TEMPORAL_TLS_CA_PATH,
            serverName: e.TEMPORAL_TLS_SERVER_NAME,
          }
        : undefined,
      apiKey: e.TEMPORAL_API_KEY,
      uiUrl: e.TEMPORAL_UI_URL.replace(/\/+$/, ''),
    },
    redis: {
      url: e.REDIS_URL,
      clusterNodes: e.REDIS_CLUSTER_NODES?.split(',').map((node) => {
        const [host, port] = node.trim().split(':');
        return { host: host!, port: Number(port) };
      }),
      keyPrefix: e.REDIS_KEY_PREFIX,
      commandTimeoutMs: e.REDIS_COMMAND_TIMEOUT_MS,
    },
    db: {
      url: e.DATABASE_URL,
      poolMax: e.DB_POOL_MAX,
      statementTimeoutMs: e.DB_STATEMENT_TIMEOUT_MS,
      connectTimeoutMs: e.DB_CONNECT_TIMEOUT_MS,
      idleInTransactionTimeoutMs: e.DB_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    },
    saga: {
      leaseMs: e.LEASE_MS,
      heartbeatIntervalMs: e.HEARTBEAT_INTERVAL_MS,
      heartbeatTimeoutMs: e.HEARTBEAT_TIMEOUT_MS,
    },
    pickupLeaseMs: e.PICKUP_LEASE_MS ?? Math.max(DEFAULT_PICKUP_LEASE_MS, e.LEASE_MS),
    simulations: e.SAGA_SIMULATIONS,
    entityExistsTtlMs: e.ENTITY_EXISTS_TTL_MS === 0 ? undefined : e.ENTITY_EXISTS_TTL_MS,
    idempotencyRetentionMs: e.IDEMPOTENCY_RETENTION_MS,
    secrets: { intentKey: intentSecret, codecKeys, codecKeysText: codecKeys ? e.SAGA_CODEC_KEYS : undefined },
    codecServer: {
      host: codecHost,
      port: Number(codecPort),
      token: e.CODEC_SERVER_TOKEN,
      corsOrigins: e.CODEC_SERVER_CORS_ORIGINS?.split(',').map((o) => o.trim()).filter((o) => o !== '') ?? [new URL(e.TEMPORAL_UI_URL).origin],
    },
    serve: {
      host: serveHost,
      port: Number(servePort),
      clients: serveClients,
      bodyLimitBytes: e.SAGA_SERVE_BODY_LIMIT_BYTES,
      maxHeaderBytes: e.SAGA_SERVE_MAX_HEADER_BYTES,
      requestTimeoutMs: e.SAGA_SERVE_REQUEST_TIMEOUT_MS,
    },
    observability: {
      ...(metricsHost !== undefined ? { metrics: { host: metricsHost, port: Number(metricsPort) } } : {}),
      ...(e.TEMPORAL_METRICS_ADDRESS !== undefined ? { temporalMetricsAddress: e.TEMPORAL_METRICS_ADDRESS } : {}),
      logLevel: e.LOG_LEVEL,
    },
  };
}

/**
 * The callers of `saga serve` from SAGA_SERVE_TOKENS (`<client id>:<token>,...`); a message names
 * the entry at fault by its position and never shows a token.
 */
function parseServeTokens(text: string): { id: string; token: string }[] {
  const clients: { id: string; token: string }[] = [];
  for (const [index, entry] of text.split(',').map((e) => e.trim()).entries()) {
    const at = entry.indexOf(':');
    const id = at < 0 ? '' : entry.slice(0, at);
    const token = at < 0 ? '' : entry.slice(at + 1);
    const where = `entry ${index + 1}`;
    if (!/^[A-Za-z0-9_]{1,32}$/.test(id)) {
      throw new ConfigError('SAGA_SERVE_TOKENS', `${where} must be <client id>:<token>, the client id 1-32 letters, digits or _ (the value is not shown)`);
    }
    if (!/^[\x21-\x7e]{16,}$/.test(token)) {
      throw new ConfigError('SAGA_SERVE_TOKENS', `${where} (client ${id}): the token must be at least 16 printable ASCII characters without spaces or commas (it is not shown)`);
    }
    if (clients.some((c) => c.id === id)) throw new ConfigError('SAGA_SERVE_TOKENS', `${where}: client ${id} is listed twice`);
    if (clients.some((c) => c.token === token)) throw new ConfigError('SAGA_SERVE_TOKENS', `${where} (client ${id}): two clients share one token`);
    clients.push({ id, token });
  }
  return clients;
}

/** A secret given as base64 (or base64url) of at least `minBytes` bytes; the message never shows it. */
function decodeSecret(variable: string, value: string, minBytes: number): Buffer {
  const text = value.trim();
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) {
    throw new ConfigError(variable, `must be base64 of at least ${minBytes} random bytes, e.g. from \`openssl rand -base64 ${minBytes}\` (the value given is not base64; it is not shown)`);
  }
  const bytes = Buffer.from(text.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  if (bytes.length < minBytes) {
    throw new ConfigError(variable, `must be base64 of at least ${minBytes} random bytes, e.g. from \`openssl rand -base64 ${minBytes}\` (the value given holds ${bytes.length}; it is not shown)`);
  }
  return bytes;
}

/**
 * The payload codec's keys of `config`, for a process that talks to Temporal: a missing key is a
 * start-up error naming SAGA_CODEC_KEYS, never a payload sent in clear.
 * @throws ConfigError when SAGA_CODEC_KEYS is not set.
 */
export function requireCodecKeys(config: Config): CodecKeys {
  const keys = config.secrets.codecKeys;
  if (!keys) {
    throw new ConfigError(
      'SAGA_CODEC_KEYS',
      'is not set: every worker, client and the CLI encrypts what it sends to Temporal (`<id>:<base64 of 32 random bytes>`, newest first; `make dev` writes a development one to .data/dev.env)',
    );
  }
  return keys;
}

/**
 * The intent-key secret of `config`, for a process that reserves or plans sagas (a client, a worker,
 * the CLI): a missing secret is a start-up error naming INTENT_KEY_SECRET, never a key made without it.
 * @throws ConfigError when INTENT_KEY_SECRET is not set.
 */
export function requireIntentSecret(config: Config): Buffer {
  const secret = config.secrets.intentKey;
  if (!secret) {
    throw new ConfigError(
      'INTENT_KEY_SECRET',
      'is not set: every client and worker needs the same secret for the intent keys (base64 of 32 random bytes, e.g. `openssl rand -base64 32`; `make dev` writes a development one to .data/dev.env)',
    );
  }
  return secret;
}

/** A value as it may be shown in an error: a URL's password masked (even in a malformed URL). */
function redact(value: string): string {
  const userinfo = /^([a-z][a-z0-9+.-]*:\/\/[^:/@\s]*:)[^@\s]*@/i;
  return value.replace(userinfo, '$1***@');
}

/**
 * The environment that {@link loadConfig} turns back into `config`: for starting another process
 * (a worker, the CLI) on the same settings. Every variable is set, so nothing leaks in from the
 * parent's environment.
 */
export function configEnv(config: Config): Record<(typeof CONFIG_VARIABLES)[number], string> {
  const { temporal, redis, db, saga, simulations, secrets, codecServer, serve, observability } = config;
  return {
    TEMPORAL_ADDRESS: temporal.address,
    TEMPORAL_NAMESPACE: temporal.namespace,
    TEMPORAL_TASK_QUEUE: temporal.taskQueue,
    TEMPORAL_TLS: temporal.tls ? 'true' : 'false',
    TEMPORAL_TLS_CERT_PATH: temporal.tls?.certPath ?? '',
    TEMPORAL_TLS_KEY_PATH: temporal.tls?.keyPath ?? '',
    TEMPORAL_TLS_CA_PATH: temporal.tls?.caPath ?? '',
    TEMPORAL_TLS_SERVER_NAME: temporal.tls?.serverName ?? '',
    TEMPORAL_API_KEY: temporal.apiKey ?? '',
    TEMPORAL_UI_URL: temporal.uiUrl,
    REDIS_URL: redis.url,
    REDIS_CLUSTER_NODES: redis.clusterNodes?.map((n) => `${n.host}:${n.port}`).join(',') ?? '',
    REDIS_KEY_PREFIX: redis.keyPrefix,
    REDIS_COMMAND_TIMEOUT_MS: String(redis.commandTimeoutMs),
    DATABASE_URL: db.url,
    DB_POOL_MAX: String(db.poolMax),
    DB_STATEMENT_TIMEOUT_MS: String(db.statementTimeoutMs),
    DB_CONNECT_TIMEOUT_MS: String(db.connectTimeoutMs),
    DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: String(db.idleInTransactionTimeoutMs),
    LEASE_MS: String(saga.leaseMs),
    HEARTBEAT_INTERVAL_MS: String(saga.heartbeatIntervalMs),
    HEARTBEAT_TIMEOUT_MS: String(saga.heartbeatTimeoutMs),
    PICKUP_LEASE_MS: String(config.pickupLeaseMs),
    ENTITY_EXISTS_TTL_MS: String(config.entityExistsTtlMs ?? 0),
    IDEMPOTENCY_RETENTION_MS: String(config.idempotencyRetentionMs),
    SAGA_SIMULATIONS: simulations ? 'true' : 'false',
    INTENT_KEY_SECRET: secrets.intentKey?.toString('base64') ?? '',
    SAGA_CODEC_KEYS: secrets.codecKeysText ?? '',
    CODEC_SERVER_ADDRESS: `${codecServer.host}:${codecServer.port}`,
    CODEC_SERVER_TOKEN: codecServer.token ?? '',
    CODEC_SERVER_CORS_ORIGINS: codecServer.corsOrigins.join(','),
    SAGA_SERVE_ADDRESS: `${serve.host}:${serve.port}`,
    SAGA_SERVE_TOKENS: serve.clients.map((c) => `${c.id}:${c.token}`).join(','),
    SAGA_SERVE_BODY_LIMIT_BYTES: String(serve.bodyLimitBytes),
    SAGA_SERVE_MAX_HEADER_BYTES: String(serve.maxHeaderBytes),
    SAGA_SERVE_REQUEST_TIMEOUT_MS: String(serve.requestTimeoutMs),
    METRICS_ADDRESS: observability.metrics ? `${observability.metrics.host}:${observability.metrics.port}` : '',
    TEMPORAL_METRICS_ADDRESS: observability.temporalMetricsAddress ?? '',
    LOG_LEVEL: observability.logLevel,
  };
}

/**
 * Loads the configuration for a command-line entry point: on a bad value it prints one line naming
 * the variable and exits with status 78 (EX_CONFIG), instead of a stack trace.
 */
export function loadConfigOrExit(env: NodeJS.ProcessEnv = process.env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`configuration error: ${err.message}\n`);
      process.exit(78);
    }
    throw err;
  }
}
