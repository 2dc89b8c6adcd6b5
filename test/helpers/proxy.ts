/** A loopback HTTP proxy in front of an S3 endpoint, which a test may let answer some requests itself. */
import { type IncomingMessage, type ServerResponse, createServer, request as httpRequest } from 'node:http';

/** A running proxy: its endpoint and how to stop it. */
export interface LoopbackProxy {
  readonly endpoint: string;
  close(): Promise<void>;
}

/**
 * Answers a request in place of the upstream (returns true), or leaves it to be forwarded (returns false).
 * It may also only look at the request.
 */
export type Intercept = (req: IncomingMessage, res: ServerResponse) => boolean;

/** Starts a proxy on 127.0.0.1 forwarding every request `intercept` does not answer to `target`. */
export async function startLoopbackProxy(target: string, intercept: Intercept = () => false): Promise<LoopbackProxy> {
  const upstream = new URL(target);
  const server = createServer((req, res) => {
    if (intercept(req, res)) return;
    const forward = httpRequest(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', (err) => {
      res.writeHead(502);
      res.end(String(err));
    });
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
