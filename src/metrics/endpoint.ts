/**
 * The `/metrics` endpoint of a process: a small HTTP server of its own (never on the HTTP API's
 * address, so it needs no token and is not exposed with the API), serving one registry in the
 * Prometheus text format.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

/** A listening metrics endpoint. */
export interface MetricsEndpoint {
  /** `http://host:port/metrics` (the port chosen, when 0 was asked for). */
  url: string;
  server: Server;
  /** Stops listening and closes its connections. */
  close: () => Promise<void>;
}

/** Serves `registry` on `GET /metrics` at `host:port` (port 0 picks a free one); anything else is 404. */
export async function serveMetrics(registry: Registry, address: { host: string; port: number }): Promise<MetricsEndpoint> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: the metrics are on GET /metrics\n');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(req.method === 'HEAD' ? undefined : text),
      (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${err instanceof Error ? err.message : String(err)}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${address.host}:${port}/metrics`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
