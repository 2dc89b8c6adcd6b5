/**
 * A seeded fault proxy (loopback only) in front of an S3 endpoint. Per request it answers 503 SlowDown,
 * resets the connection before the request reaches the store, lets the request take effect and then drops
 * the answer (the hard case for a conditional write, a lock take and a release), delays it by seconds, or
 * passes it through. `onAnswered` sees every request whose answer reached the caller (used to SIGKILL the
 * caller right after a chosen S3 step).
 */
import { type IncomingMessage, type Server, type ServerResponse, createServer, request as httpRequest } from 'node:http';
import type { Rng } from './rng';

/** The kinds of fault the proxy injects. */
export type FaultKind = 'slowdown' | 'reset' | 'drop-answer' | 'delay';
export const FAULT_KINDS: readonly FaultKind[] = ['slowdown', 'reset', 'drop-answer', 'delay'];

/** Probability of each fault per request (the rest pass). */
export type FaultRates = Record<FaultKind, number>;
export const NO_FAULTS: FaultRates = { slowdown: 0, reset: 0, 'drop-answer': 0, delay: 0 };

/** One request as the proxy saw it: method and decoded object key (path-style, bucket stripped). */
export interface SeenRequest {
  readonly method: string;
  readonly key: string;
  readonly status: number;
}

export interface FaultProxy {
  readonly endpoint: string;
  rates: FaultRates;
  readonly faults: Record<FaultKind, number>;
  requests: number;
  onAnswered?: (request: SeenRequest) => void;
  /** Sees every request as it arrives, faulted or not (method and URL, e.g. to evaluate IAM on it). */
  onRequest?: (method: string, url: string) => void;
  /** Sees every answered request (for the run's trace). */
  onSeen?: (request: SeenRequest) => void;
  close(): Promise<void>;
}

const SLOWDOWN =
  '<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>';

function keyOf(url: string): string {
  const path = new URL(url, 'http://proxy').pathname;
  const slash = path.indexOf('/', 1);
  return slash < 0 ? '' : decodeURIComponent(path.slice(slash + 1));
}

/** Starts a fault proxy on 127.0.0.1 forwarding to `target`; faults are drawn from `rng`. */
export async function startFaultProxy(target: string, rng: Rng, rates: FaultRates): Promise<FaultProxy> {
  const upstream = new URL(target);
  const proxy: FaultProxy = {
    endpoint: '',
    rates,
    faults: { slowdown: 0, reset: 0, 'drop-answer': 0, delay: 0 },
    requests: 0,
    close: async () => undefined,
  };
  const pick = (): FaultKind | undefined => {
    let r = rng.next();
    for (const kind of FAULT_KINDS) {
      if (r < proxy.rates[kind]) return kind;
      r -= proxy.rates[kind];
    }
    return undefined;
  };
  const forward = (req: IncomingMessage, res: ServerResponse, body: Buffer, drop: boolean): void => {
    const out = httpRequest(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (c: Buffer) => chunks.push(c));
        answer.on('end', () => {
          if (drop) {
            // The store did the work; the caller never learns it.
            res.socket?.destroy();
            return;
          }
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          res.end(Buffer.concat(chunks));
          const seen = { method: req.method ?? 'GET', key: keyOf(req.url ?? '/'), status: answer.statusCode ?? 0 };
          proxy.onSeen?.(seen);
          proxy.onAnswered?.(seen);
        });
      },
    );
    out.on('error', () => res.socket?.destroy());
    out.end(body);
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      proxy.requests++;
      proxy.onRequest?.(req.method ?? 'GET', req.url ?? '/');
      const body = Buffer.concat(chunks);
      const fault = pick();
      if (fault) proxy.faults[fault]++;
      switch (fault) {
        case 'slowdown':
          res.writeHead(503, { 'content-type': 'application/xml' });
          res.end(SLOWDOWN);
          return;
        case 'reset':
          req.socket.destroy();
          return;
        case 'drop-answer':
          forward(req, res, body, true);
          return;
        case 'delay':
          setTimeout(() => forward(req, res, body, false), 1000 + Math.floor(rng.next() * 2000));
          return;
        default:
          forward(req, res, body, false);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  (proxy as { endpoint: string }).endpoint = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  proxy.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return proxy;
}
