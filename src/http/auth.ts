/**
 * Who may call the HTTP API: one bearer token per client (SAGA_SERVE_TOKENS). Tokens are kept only as
 * SHA-256 digests and compared in constant time, against every client's, so neither the timing nor
 * the answer tells a caller how close a guess was, or which client a token nearly matched.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

/** A caller of the API: its id (its idempotency-key namespace) and bearer token. */
export interface ApiClient {
  /** 1-32 letters, digits or _; names the client's namespace of idempotency keys. */
  id: string;
  /** The bearer token; at least 16 printable ASCII characters without spaces. */
  token: string;
}

/** The client ids a caller may have: the characters keep `<id>.<key>` unambiguous (see idempotency-key.ts). */
export const CLIENT_ID_PATTERN = /^[A-Za-z0-9_]{1,32}$/;

/** Finds the client of an `Authorization` header. */
export class BearerTokens {
  readonly #clients: { id: string; digest: Buffer }[];

  /** @throws TypeError when a client id or token is malformed or repeated (never quoting a token). */
  constructor(clients: readonly ApiClient[]) {
    if (clients.length === 0) throw new TypeError('saga server clients: at least one client with a token is required');
    this.#clients = clients.map((c, index) => {
      if (!CLIENT_ID_PATTERN.test(c.id)) throw new TypeError(`saga server clients: client ${index + 1} has an id that is not 1-32 letters, digits or _`);
      if (!/^[\x21-\x7e]{16,}$/.test(c.token)) throw new TypeError(`saga server clients: the token of client ${c.id} must be at least 16 printable ASCII characters without spaces`);
      return { id: c.id, digest: digest(c.token) };
    });
    if (new Set(clients.map((c) => c.id)).size !== clients.length) throw new TypeError('saga server clients: a client id is listed twice');
    if (new Set(this.#clients.map((c) => c.digest.toString('hex'))).size !== clients.length) throw new TypeError('saga server clients: two clients share a token');
  }

  /** The id of the client whose token `authorization` carries (`Bearer <token>`), or undefined. */
  clientOf(authorization: string | undefined): string | undefined {
    const match = /^Bearer +(\S+) *$/i.exec(authorization ?? '');
    if (match?.[1] === undefined) return undefined;
    const presented = digest(match[1]);
    let found: string | undefined;
    // Every digest is compared, whatever matched first: the time taken does not depend on which.
    for (const client of this.#clients) {
      if (timingSafeEqual(presented, client.digest)) found = client.id;
    }
    return found;
  }
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}
