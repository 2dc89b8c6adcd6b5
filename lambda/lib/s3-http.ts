/**
 * The direct path's own HTTP/1.1 connections: kept alive, at most `maxSockets` to a host, one exchange at a
 * time on each. Node's http client makes a request object, an answer stream and a dozen listeners for every
 * request; a GET of a small object needs none of them, and in a hydrate they cost more CPU than the rest of
 * a download. Only GET and HEAD are sent here, never with a body, so any of them may be sent again.
 */
import { type Socket, connect as netConnect, isIP } from 'node:net';
import { type ConnectionOptions, connect as tlsConnect } from 'node:tls';
import {
  type Carrier,
  Exchange,
  type HttpAnswer,
  type HttpExchange,
  type HttpTarget,
  cutError,
  malformed,
  timeoutError,
} from './s3-http-answer';

export type { HttpAnswer, HttpExchange, HttpTarget };

/** How a pool connects and how long it waits. */
export interface HttpPoolOptions {
  readonly maxSockets: number;
  readonly connectionTimeoutMs: number;
  /** How long a connection in use may stay silent, answer headers or body, before the exchange fails. */
  readonly requestTimeoutMs: number;
  /** The endpoint as the user gave it, named by a timeout. */
  readonly where: string;
  /** TLS settings beyond the platform's (a test's own authority). */
  readonly tls?: Pick<ConnectionOptions, 'ca'>;
}

/** Bytes a header value or a path may hold: visible ASCII, spaces and tabs; never a line break. */
const UNSAFE = /[^\t\x20-\x7e]/;

/** One kept-alive connection and the exchange it carries, if any. */
class Connection implements Carrier {
  exchange?: Exchange;

  constructor(
    readonly socket: Socket,
    readonly key: string,
    private readonly pool: HttpPool,
  ) {
    socket.on('data', (chunk: Buffer) => (this.exchange ? this.exchange.data(chunk) : socket.destroy()));
    socket.on('end', () => {
      if (!this.exchange?.endsWithClose()) this.lost(cutError());
      socket.destroy();
    });
    socket.on('error', (err) => this.lost(err));
    socket.on('close', () => this.lost(cutError()));
    socket.on('timeout', () => this.lost(pool.silence()));
  }

  /** Writes `exchange` to this connection. */
  carry(exchange: Exchange): void {
    this.exchange = exchange;
    exchange.connection = this;
    this.socket.ref();
    this.socket.setTimeout(this.pool.options.requestTimeoutMs);
    this.socket.write(exchange.text, 'latin1');
  }

  /** Its exchange ended; the connection goes back to the pool, or away. */
  finished(keepAlive: boolean): void {
    this.exchange = undefined;
    this.socket.setTimeout(0);
    if (!keepAlive) return void this.socket.destroy();
    this.socket.resume();
    this.socket.unref();
    this.pool.idle(this);
  }

  /** The connection failed or closed: its exchange fails (a GET or HEAD, which `DirectRequests` may send again). */
  private lost(err: Error): void {
    const exchange = this.exchange;
    this.exchange = undefined;
    this.socket.destroy();
    this.pool.gone(this);
    exchange?.fail(err);
  }
}

/** Kept-alive HTTP/1.1 connections, at most `maxSockets` to each host. */
export class HttpPool {
  private readonly free = new Map<string, Connection[]>();
  private readonly open = new Map<string, number>();
  private readonly queued = new Map<string, Exchange[]>();
  private readonly all = new Set<Connection>();

  constructor(readonly options: HttpPoolOptions) {}

  /**
   * Sends `request` to `target`; resolves with its answer, whatever the status.
   * @param target where to send it
   * @param request the signed request
   * @example const answer = await pool.send({ protocol: 'http:', hostname: '127.0.0.1', port: 9000 }, { method: 'HEAD', path: '/b/k', headers })
   */
  send(target: HttpTarget, request: HttpExchange): Promise<HttpAnswer> {
    return new Promise<HttpAnswer>((resolve, reject) => {
      const host = target.port === undefined ? target.hostname : `${target.hostname}:${target.port}`;
      let text = `${request.method} ${request.path} HTTP/1.1\r\n`;
      if (UNSAFE.test(request.path) || request.path.includes(' ')) return reject(malformed(`request path ${request.path}`));
      for (const name in request.headers) {
        const value = request.headers[name];
        if (UNSAFE.test(value) || UNSAFE.test(name) || name.includes(':'))
          return reject(Object.assign(new Error(`invalid character in header ${name}`), { code: 'ERR_INVALID_CHAR' }));
        text += `${name}: ${value}\r\n`;
      }
      text += '\r\n';
      this.dispatch(new Exchange(`${target.protocol}//${host}`, target, request, text, resolve, reject));
    });
  }

  /** Puts `exchange` on a free connection, a new one, or in the queue of its host. */
  dispatch(exchange: Exchange): void {
    const free = this.free.get(exchange.key);
    const connection = free?.pop();
    if (connection) {
      connection.carry(exchange);
      return;
    }
    const open = this.open.get(exchange.key) ?? 0;
    if (open >= this.options.maxSockets) {
      const queue = this.queued.get(exchange.key) ?? [];
      queue.push(exchange);
      this.queued.set(exchange.key, queue);
      return;
    }
    this.open.set(exchange.key, open + 1);
    this.connect(exchange).carry(exchange);
  }

  private connect(exchange: Exchange): Connection {
    const { protocol, hostname, port } = exchange.target;
    const https = protocol === 'https:';
    const socket: Socket = https
      ? tlsConnect({
          host: hostname,
          port: port ?? 443,
          servername: isIP(hostname) ? undefined : hostname,
          ALPNProtocols: ['http/1.1'],
          ...this.options.tls,
        })
      : netConnect({ host: hostname, port: port ?? 80 });
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 1000);
    const connection = new Connection(socket, exchange.key, this);
    this.all.add(connection);
    const { connectionTimeoutMs, where } = this.options;
    const timer = setTimeout(
      () => socket.destroy(timeoutError(`could not connect to ${where} within ${connectionTimeoutMs} ms`)),
      connectionTimeoutMs,
    );
    socket.once(https ? 'secureConnect' : 'connect', () => clearTimeout(timer));
    socket.once('close', () => clearTimeout(timer));
    return connection;
  }

  /** A silent connection's error. */
  silence(): Error {
    const { where, requestTimeoutMs } = this.options;
    return timeoutError(`no answer from ${where} within ${requestTimeoutMs} ms (request timed out)`);
  }

  /** `connection` is free: the next queued exchange of its host takes it, or it waits. */
  idle(connection: Connection): void {
    const next = this.queued.get(connection.key)?.shift();
    if (next) {
      connection.carry(next);
      return;
    }
    const free = this.free.get(connection.key) ?? [];
    free.push(connection);
    this.free.set(connection.key, free);
  }

  /** `connection` closed: a queued exchange of its host gets a connection of its own. */
  gone(connection: Connection): void {
    if (!this.all.delete(connection)) return;
    const free = this.free.get(connection.key);
    const at = free?.indexOf(connection) ?? -1;
    if (at >= 0) free?.splice(at, 1);
    this.open.set(connection.key, (this.open.get(connection.key) ?? 1) - 1);
    const next = this.queued.get(connection.key)?.shift();
    if (next) this.dispatch(next);
  }

  /** Closes every connection; exchanges under way or queued fail. Later exchanges open new ones. */
  destroy(): void {
    for (const queue of this.queued.values()) for (const exchange of queue.splice(0)) exchange.fail(new Error('the client was destroyed'));
    for (const connection of [...this.all]) connection.socket.destroy();
  }
}
