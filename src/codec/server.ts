/**
 * The codec server: Temporal's remote-codec HTTP contract over a payload codec, so the Web UI and the
 * CLI can show (and send) data that Temporal itself only ever stores encrypted. `POST /encode` and
 * `POST /decode` take and answer `{"payloads":[{"metadata":{"<key>":"<base64>"},"data":"<base64>"}]}`
 * (the proto3 JSON form of payloads). Errors are RFC 9457 problem documents. Nothing it logs holds
 * payload data or the token.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Payload, PayloadCodec } from '@temporalio/common';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { PayloadDecryptionError } from './encryption-codec';

/** Largest request body accepted by default, in bytes (4 MiB, the default gRPC message limit). */
export const DEFAULT_CODEC_BODY_LIMIT_BYTES = 4 * 1024 * 1024;

/** The request headers a browser may send to the codec endpoints (the CORS preflight answer). */
export const CODEC_ALLOWED_HEADERS = 'Content-Type, X-Namespace, Authorization';

/** Options of {@link createCodecServer}. */
export interface CodecServerOptions {
  /** The codec that `/encode` and `/decode` run payloads through. */
  codec: PayloadCodec;
  /**
   * Origins (`scheme://host[:port]`, exactly as a browser sends them) of the Temporal Web UIs allowed
   * to call the server from a browser, with credentials. Other origins get no CORS headers, so
   * browsers refuse them; non-browser clients are not affected. Empty for none.
   */
  corsOrigins: string[];
  /**
   * When set, `/encode` and `/decode` answer 401 unless the request carries
   * `Authorization: Bearer <token>`. Must be non-empty and printable ASCII without spaces.
   * @default undefined: no token is required
   */
  token?: string;
  /**
   * When set, `/encode` and `/decode` answer 403 unless the `X-Namespace` header names one of these
   * namespaces; an empty header (what the Temporal CLI sends for its default namespace) names the
   * one namespace of a server that serves one. Must not be empty.
   * @default undefined: every namespace is served
   */
  namespaces?: string[];
  /**
   * Largest request body accepted, in bytes; larger ones get 413.
   * @default {@link DEFAULT_CODEC_BODY_LIMIT_BYTES}
   */
  bodyLimitBytes?: number;
  /**
   * Whether Fastify logs requests (method, URL, status, timing: never headers or bodies) to stdout.
   * @default false
   */
  logger?: boolean;
}

/** The options with defaults filled in and values checked. */
interface ResolvedOptions {
  codec: PayloadCodec;
  corsOrigins: ReadonlySet<string>;
  tokenDigest: Buffer | undefined;
  namespaces: ReadonlySet<string> | undefined;
  bodyLimitBytes: number;
  logger: boolean;
}

/**
 * A codec server over `options.codec`, ready to `listen` (not listening yet):
 * - `POST /encode`, `POST /decode`: 200 with the payloads run through the codec (`{}`, proto3 JSON's
 *   empty list, answers `{"payloads":[]}`); 400 for a body that is not JSON of the right shape; 401
 *   without the configured bearer token; 403 for a namespace outside the allow-list; 413 over the
 *   body limit; 415 for a type other than `application/json`; 422 when a payload cannot be
 *   decrypted (the detail names the key id, never the data).
 * - `OPTIONS /encode`, `OPTIONS /decode`: the CORS preflight, 204, with CORS headers for allowed
 *   origins only.
 * - `GET /livez`: 200 `{"status":"ok"}`, without token or namespace checks.
 *
 * @throws TypeError when an option is malformed (the message never quotes the token).
 */
export function createCodecServer(options: CodecServerOptions): FastifyInstance {
  const resolved = resolveOptions(options);
  const app = Fastify({ bodyLimit: resolved.bodyLimitBytes, logger: resolved.logger });

  // JSON only: a body of any other type is refused with 415 before it is read.
  app.removeContentTypeParser('text/plain');

  app.addHook('onRequest', async (request, reply) => {
    reply.header('Vary', 'Origin');
    const origin = request.headers.origin;
    if (origin !== undefined && resolved.corsOrigins.has(origin)) {
      reply.header('Access-Control-Allow-Origin', origin);
      reply.header('Access-Control-Allow-Credentials', 'true');
    }
  });

  app.setErrorHandler(async (error: FastifyError, request, reply) => {
    if (error instanceof PayloadDecryptionError) {
      return sendProblem(reply, 422, error.message);
    }
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      // Fastify's own client errors (body too large, unsupported type, invalid JSON) quote no body.
      return sendProblem(reply, status, error.message);
    }
    request.log.error({ err: error }, 'codec request failed');
    return sendProblem(reply, 500, 'the codec failed; see the server log');
  });

  app.setNotFoundHandler(async (request, reply) => sendProblem(reply, 404, `no route ${request.method} ${request.url}`));

  const guard = async (request: FastifyRequest, reply: FastifyReply) => {
    if (resolved.tokenDigest === undefined && !isLoopbackHost(request.headers.host)) {
      // Without a token only a loopback name will do: a web page whose own name was rebound to this
      // address (DNS rebinding) sends that name, and must not read decrypted payloads.
      return sendProblem(reply, 403, 'without a token this server answers only requests to a loopback name (localhost, 127.0.0.1, [::1])');
    }
    if (resolved.tokenDigest !== undefined && !hasToken(request, resolved.tokenDigest)) {
      reply.header('WWW-Authenticate', 'Bearer realm="codec"');
      return sendProblem(reply, 401, 'a valid "Authorization: Bearer <token>" header is required');
    }
    if (resolved.namespaces !== undefined) {
      const header = request.headers['x-namespace'];
      const [only] = resolved.namespaces.size === 1 ? resolved.namespaces : [];
      const namespace = header === '' ? only : header;
      if (typeof namespace !== 'string' || !resolved.namespaces.has(namespace)) {
        return sendProblem(reply, 403, 'the X-Namespace header must name a namespace this server serves');
      }
    }
  };

  for (const operation of ['encode', 'decode'] as const) {
    app.post(`/${operation}`, { onRequest: guard }, async (request, reply) => {
      const payloads = readPayloads(request.body);
      if (typeof payloads === 'string') return sendProblem(reply, 400, payloads);
      const result = await resolved.codec[operation](payloads);
      return reply.send({ payloads: result.map(writePayload) });
    });
    app.options(`/${operation}`, async (request, reply) => {
      if (reply.hasHeader('Access-Control-Allow-Origin')) {
        reply.header('Access-Control-Allow-Methods', 'POST');
        reply.header('Access-Control-Allow-Headers', CODEC_ALLOWED_HEADERS);
        reply.header('Access-Control-Max-Age', '600');
      }
      return reply.code(204).send();
    });
  }

  app.get('/livez', async () => ({ status: 'ok' }));

  return app;
}

function resolveOptions(options: CodecServerOptions): ResolvedOptions {
  const corsOrigins = new Set<string>();
  for (const origin of options.corsOrigins) {
    let parsed: URL | undefined;
    try {
      parsed = new URL(origin);
    } catch {
      parsed = undefined;
    }
    // Credentials rule out the "*" wildcard; browsers send the bare origin, so only that can match.
    if (parsed === undefined || parsed.origin !== origin || !/^https?:$/.test(parsed.protocol)) {
      throw new TypeError(`codec server corsOrigins: ${JSON.stringify(origin)} is not an origin like "http://localhost:8233"`);
    }
    corsOrigins.add(origin);
  }
  const { token, namespaces } = options;
  if (token !== undefined && !/^[\x21-\x7e]+$/.test(token)) {
    throw new TypeError('codec server token: must be non-empty printable ASCII without spaces');
  }
  if (namespaces !== undefined && namespaces.length === 0) {
    throw new TypeError('codec server namespaces: must not be empty (leave it out to serve every namespace)');
  }
  const bodyLimitBytes = options.bodyLimitBytes ?? DEFAULT_CODEC_BODY_LIMIT_BYTES;
  if (!Number.isSafeInteger(bodyLimitBytes) || bodyLimitBytes <= 0) {
    throw new TypeError(`codec server bodyLimitBytes: must be a positive whole number (got ${bodyLimitBytes})`);
  }
  return {
    codec: options.codec,
    corsOrigins,
    tokenDigest: token === undefined ? undefined : digest(token),
    namespaces: namespaces === undefined ? undefined : new Set(namespaces),
    bodyLimitBytes,
    logger: options.logger ?? false,
  };
}

/**
 * Whether a `Host` header (or a listen address) names this machine by a loopback name or address:
 * `localhost`, `127.x.x.x`, `[::1]` or `::1`, with any port.
 */
export function isLoopbackHost(host: string | undefined): boolean {
  const text = host?.trim().toLowerCase() ?? '';
  // `[v6]:port`, a bare v6 address (more than one colon), or `name:port`.
  const name = text.startsWith('[') ? text.slice(0, text.indexOf(']') + 1) : text.split(':').length > 2 ? text : (text.split(':')[0] ?? '');
  return name === 'localhost' || name === '[::1]' || name === '::1' || /^127(\.\d{1,3}){3}$/.test(name);
}

function hasToken(request: FastifyRequest, tokenDigest: Buffer): boolean {
  const match = /^Bearer +(\S+) *$/i.exec(request.headers.authorization ?? '');
  // Comparing fixed-length digests in constant time reveals neither the token nor its length.
  return match?.[1] !== undefined && timingSafeEqual(digest(match[1]), tokenDigest);
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

function sendProblem(reply: FastifyReply, status: number, detail: string): FastifyReply {
  return reply
    .code(status)
    .type('application/problem+json')
    .send({ type: 'about:blank', title: STATUS_CODES[status] ?? 'Error', status, detail });
}

const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

/** The payloads of a request body, or a sentence saying what is wrong with it (quoting no data). */
function readPayloads(body: unknown): Payload[] | string {
  // proto3 JSON leaves an empty repeated field out (or writes null), and so does the Go SDK's remote
  // codec: the Temporal CLI sends `{}` for the arguments of an update that takes none (a redrive).
  const list = isRecord(body) ? (body.payloads ?? []) : undefined;
  if (!Array.isArray(list)) return 'the body must be a JSON object with a "payloads" array';
  const payloads: Payload[] = [];
  for (const [index, item] of (list as unknown[]).entries()) {
    const where = `payloads[${index}]`;
    if (!isRecord(item)) return `${where} must be an object`;
    const { metadata = {}, data = '' } = item;
    if (!isRecord(metadata)) return `${where}.metadata must be an object of base64 strings`;
    const entries: [string, Uint8Array][] = [];
    for (const [key, value] of Object.entries(metadata)) {
      const bytes = fromBase64(value);
      if (bytes === undefined) return `${where}.metadata has a value that is not a base64 string`;
      entries.push([key, bytes]);
    }
    const bytes = fromBase64(data);
    if (bytes === undefined) return `${where}.data must be a base64 string`;
    // fromEntries defines own properties, so a "__proto__" key stays a plain metadata key.
    payloads.push({ metadata: Object.fromEntries(entries), data: bytes });
  }
  return payloads;
}

/** Standard or URL-safe base64, padded or not, as proto3 JSON allows; undefined for anything else. */
function fromBase64(value: unknown): Buffer | undefined {
  if (typeof value !== 'string' || !BASE64.test(value)) return undefined;
  const digits = value.replace(/=+$/, '').length;
  // One digit left over cannot be a byte; padding, when present, must complete the last quantum.
  if (digits % 4 === 1 || (digits !== value.length && value.length % 4 !== 0)) return undefined;
  // Node's base64 decoder reads both alphabets.
  return Buffer.from(value, 'base64');
}

function writePayload(payload: Payload): { metadata: Record<string, string>; data: string } {
  const metadata = Object.fromEntries(Object.entries(payload.metadata ?? {}).map(([key, value]) => [key, Buffer.from(value).toString('base64')]));
  return { metadata, data: Buffer.from(payload.data ?? new Uint8Array(0)).toString('base64') };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
