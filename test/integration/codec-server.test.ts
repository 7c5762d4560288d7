/**
 * The codec server over HTTP, as the Temporal Web UI and CLI call it: real sockets, real fetch, the
 * real encryption codec. Each test starts its own server on a free port and closes it at the end.
 */
import { request as httpRequest } from 'node:http';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { describe, expect, it, onTestFinished } from 'vitest';
import { EncryptionCodec, createCodecServer, generateCodecKey, parseCodecKeys, type CodecServerOptions } from '../../src/codec';

const UI_ORIGIN = 'http://localhost:8233';
const TOKEN = 'test-codec-token-7f3a';
const SECRET_TEXT = 'Jane Doe, card 4111 1111 1111 1111';

interface JsonPayload {
  metadata: Record<string, string>;
  data: string;
}

const codec = new EncryptionCodec(parseCodecKeys(`${generateCodecKey('k2')},${generateCodecKey('k1')}`));

/** Starts a codec server with `options` on a free port for the current test; closed when the test ends. */
async function startServer(options: Partial<CodecServerOptions> = {}): Promise<string> {
  const app = createCodecServer({ codec, corsOrigins: [UI_ORIGIN], ...options });
  onTestFinished(async () => {
    await app.close();
  });
  return app.listen({ port: 0, host: '127.0.0.1' });
}

function toJson(payload: Payload): JsonPayload {
  const metadata = Object.fromEntries(Object.entries(payload.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')]));
  return { metadata, data: Buffer.from(payload.data ?? []).toString('base64') };
}

function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** POSTs `body` to `url`'s /decode with a `Host` header of its own (fetch sets Host itself). */
function postWithHost(url: URL, host: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      { hostname: url.hostname, port: url.port, path: '/decode', method: 'POST', headers: { Host: host, 'Content-Type': 'application/json', ...headers } },
      (response) => {
        response.resume();
        response.on('end', () => resolve({ status: response.statusCode ?? 0 }));
      },
    );
    request.on('error', reject);
    request.end(JSON.stringify(body));
  });
}

async function expectProblem(response: Response, status: number): Promise<{ detail: string }> {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  const problem = (await response.json()) as { type: string; title: string; status: number; detail: string };
  expect(problem).toEqual({ type: 'about:blank', title: expect.any(String), status, detail: expect.any(String) });
  return problem;
}

describe('codec server', () => {
  it('encodes then decodes payloads over HTTP back to the input', async () => {
    const url = await startServer();
    const input = [SECRET_TEXT, { order: 7, items: ['A-1'] }, null].map((v) => toJson(defaultPayloadConverter.toPayload(v)));

    const encodeResponse = await post(`${url}/encode`, { payloads: input });
    const encoded = (await encodeResponse.json()) as { payloads: JsonPayload[] };
    const decodeResponse = await post(`${url}/decode`, encoded);
    const decoded = (await decodeResponse.json()) as { payloads: JsonPayload[] };

    expect(encodeResponse.status).toBe(200);
    expect(encoded.payloads).toHaveLength(3);
    for (const payload of encoded.payloads) {
      expect(Buffer.from(payload.metadata.encoding ?? '', 'base64').toString()).toBe('binary/encrypted');
      expect(Buffer.from(payload.metadata['encryption-key-id'] ?? '', 'base64').toString()).toBe('k2');
      expect(Buffer.from(payload.data, 'base64').toString('latin1')).not.toContain('Jane Doe');
    }
    expect(decodeResponse.status).toBe(200);
    expect(decoded).toEqual({ payloads: input });
  });

  it('decodes payloads that workers encrypted, and passes clear ones through', async () => {
    const url = await startServer();
    const clear = defaultPayloadConverter.toPayload('recorded before encryption');
    const encrypted = await codec.encode([defaultPayloadConverter.toPayload(SECRET_TEXT)]);

    const response = await post(`${url}/decode`, { payloads: [...encrypted, clear].map(toJson) });

    expect(response.status).toBe(200);
    const { payloads } = (await response.json()) as { payloads: JsonPayload[] };
    expect(payloads).toEqual([toJson(defaultPayloadConverter.toPayload(SECRET_TEXT)), toJson(clear)]);
  });

  it('answers a payload it cannot decrypt with 422, naming the key id and not the data', async () => {
    const url = await startServer();
    const [encrypted] = await new EncryptionCodec(parseCodecKeys(generateCodecKey('gone'))).encode([defaultPayloadConverter.toPayload(SECRET_TEXT)]);

    const response = await post(`${url}/decode`, { payloads: [toJson(encrypted!)] });

    const problem = await expectProblem(response, 422);
    expect(problem.detail).toContain('"gone"');
    expect(JSON.stringify(problem)).not.toContain(toJson(encrypted!).data.slice(0, 16));
  });

  it('answers the CORS preflight of an allowed origin with the CORS headers', async () => {
    const url = await startServer();

    const response = await fetch(`${url}/decode`, {
      method: 'OPTIONS',
      headers: { Origin: UI_ORIGIN, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'content-type,x-namespace' },
    });

    expect(response.status).toBe(204);
    expect(response.headers.get('access-control-allow-origin')).toBe(UI_ORIGIN);
    expect(response.headers.get('access-control-allow-methods')).toBe('POST');
    expect(response.headers.get('access-control-allow-headers')).toBe('Content-Type, X-Namespace, Authorization');
    expect(response.headers.get('access-control-allow-credentials')).toBe('true');
  });

  it('gives a disallowed origin no CORS headers', async () => {
    const url = await startServer();

    const preflight = await fetch(`${url}/decode`, { method: 'OPTIONS', headers: { Origin: 'https://evil.example', 'Access-Control-Request-Method': 'POST' } });
    const request = await post(`${url}/decode`, { payloads: [] }, { Origin: 'https://evil.example' });

    for (const response of [preflight, request]) {
      expect([...response.headers.keys()].filter((name) => name.startsWith('access-control-'))).toEqual([]);
    }
  });

  it('lets an allowed origin read the answer of a request', async () => {
    const url = await startServer();

    const response = await post(`${url}/decode`, { payloads: [] }, { Origin: UI_ORIGIN });

    expect(response.status).toBe(200);
    expect(response.headers.get('access-control-allow-origin')).toBe(UI_ORIGIN);
    expect(response.headers.get('access-control-allow-credentials')).toBe('true');
  });

  it.each([
    ['no Authorization header', {}],
    ['a wrong token', { Authorization: 'Bearer not-the-token' }],
    ['the token with another scheme', { Authorization: `Basic ${TOKEN}` }],
  ])('answers a request with %s with 401 when a token is configured', async (_name, headers: Record<string, string>) => {
    const url = await startServer({ token: TOKEN });

    const response = await post(`${url}/encode`, { payloads: [] }, headers);

    const problem = await expectProblem(response, 401);
    expect(response.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(JSON.stringify(problem)).not.toContain(TOKEN);
  });

  it('serves a request with the right token', async () => {
    const url = await startServer({ token: TOKEN });

    const response = await post(`${url}/encode`, { payloads: [] }, { Authorization: `Bearer ${TOKEN}` });

    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ payloads: [] });
  });

  it('answers a namespace outside the allow-list, or none, with 403 and serves an allowed one', async () => {
    const url = await startServer({ namespaces: ['default'] });

    const other = await post(`${url}/decode`, { payloads: [] }, { 'X-Namespace': 'other' });
    const missing = await post(`${url}/decode`, { payloads: [] });
    const allowed = await post(`${url}/decode`, { payloads: [] }, { 'X-Namespace': 'default' });

    await expectProblem(other, 403);
    await expectProblem(missing, 403);
    expect(allowed.status).toBe(200);
  });

  it('takes an empty namespace header, the Temporal CLI\'s for its default namespace, as the one namespace it serves', async () => {
    const one = await startServer({ namespaces: ['default'] });
    const two = await startServer({ namespaces: ['default', 'other'] });

    const served = await post(`${one}/decode`, { payloads: [] }, { 'X-Namespace': '' });
    const ambiguous = await post(`${two}/decode`, { payloads: [] }, { 'X-Namespace': '' });

    expect(served.status).toBe(200);
    await expectProblem(ambiguous, 403);
  });

  it.each([
    ['evil.example:8234', 403],
    ['127.0.0.1.evil.example', 403],
    ['localhost:8234', 200],
    ['127.0.0.1', 200],
    ['[::1]:8234', 200],
  ])('without a token answers a request to the host %s with %s (DNS rebinding)', async (host, status) => {
    const url = new URL(await startServer());

    const response = await postWithHost(url, host, { payloads: [] });

    expect(response.status).toBe(status);
  });

  it('with a token serves a request to any host name that carries it', async () => {
    const url = new URL(await startServer({ token: TOKEN }));

    const response = await postWithHost(url, 'codec.internal.example', { payloads: [] }, { Authorization: `Bearer ${TOKEN}` });

    expect(response.status).toBe(200);
  });

  it.each(['encode', 'decode'])('answers /%s of {}, proto3 JSON of no payloads (the Temporal CLI\'s for an update without arguments), with no payloads', async (operation) => {
    const url = await startServer();

    const responses = [await post(`${url}/${operation}`, {}), await post(`${url}/${operation}`, { payloads: null })];

    for (const response of responses) {
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ payloads: [] });
    }
  });

  it.each([
    ['invalid JSON', '{"payloads": [', 400],
    ['a body that is not an object', [], 400],
    ['a body whose payloads is not an array', { payloads: { 0: {} } }, 400],
    ['a payload whose data is not a string', { payloads: [{ metadata: {}, data: 12 }] }, 400],
    ['a metadata value that is not base64', { payloads: [{ metadata: { encoding: 'not base64!' }, data: '' }] }, 400],
  ])('answers %s with a 400 problem', async (_name, body, status) => {
    const url = await startServer();

    const response = await post(`${url}/decode`, body);

    await expectProblem(response, status);
  });

  it('refuses a body over the limit with 413 and a body of another type with 415', async () => {
    const url = await startServer({ bodyLimitBytes: 1024 });

    const large = await post(`${url}/encode`, { payloads: [{ metadata: {}, data: Buffer.alloc(2048).toString('base64') }] });
    const text = await fetch(`${url}/encode`, { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: 'hello' });

    await expectProblem(large, 413);
    await expectProblem(text, 415);
  });

  it('answers GET /livez without a token', async () => {
    const url = await startServer({ token: TOKEN, namespaces: ['default'] });

    const response = await fetch(`${url}/livez`);

    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'ok' });
  });
});
