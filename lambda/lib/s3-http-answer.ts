/**
 * Reading an HTTP/1.1 answer from the bytes of a connection, for the direct path's own connections
 * (`s3-http.ts`): status line, headers, then a body framed by its length, in chunks, or by the connection's end,
 * read whole into one array or handed over as a stream.
 */
import type { Socket } from 'node:net';
import { Readable } from 'node:stream';

/** Where an exchange is sent. */
export interface HttpTarget {
  readonly protocol: string;
  readonly hostname: string;
  readonly port?: number;
}

/** One request, signed. */
export interface HttpExchange {
  readonly method: 'GET' | 'HEAD';
  /** Path and query, escaped. */
  readonly path: string;
  /** Names in lower case. */
  readonly headers: Readonly<Record<string, string>>;
  /** A 2xx answer's body longer than this, or of a length not announced, is handed over as a stream; undefined: always read whole. */
  readonly streamOver?: number;
}

/** An answer: status, headers (names in lower case) and either the body read whole or a stream of it. */
export interface HttpAnswer {
  readonly status: number;
  readonly headers: Record<string, string | undefined>;
  readonly body?: Buffer;
  readonly stream?: Readable;
}

/** A timeout named as the SDK names its own (`TimeoutError`), so the retries and `translateError` treat both alike. */
export function timeoutError(message: string): Error {
  return Object.assign(new Error(message), { name: 'TimeoutError' });
}

/** A connection that ended before its answer did: retried as the SDK retries a reset. */
export function cutError(): Error {
  return Object.assign(new Error('the connection closed before the answer ended'), { code: 'ECONNRESET' });
}

/** An answer that is not HTTP/1.1 as this reader takes it: never retried. */
export function malformed(why: string): Error {
  return Object.assign(new Error(`malformed HTTP answer: ${why}`), { code: 'HPE_INVALID' });
}

const HEAD_END = Buffer.from('\r\n\r\n');
const MAX_HEAD_BYTES = 64 << 10;
/** What carries an exchange: its socket, and what is told when the answer has ended. */
export interface Carrier {
  readonly socket: Socket;
  exchange?: Exchange;
  /** The answer ended; `keepAlive` when the connection may carry another. */
  finished(keepAlive: boolean): void;
}

/** How an answer's body is framed: by its announced length, in chunks, or by the end of the connection. */
type Framing = 'length' | 'chunked' | 'until-close';

/** Bodies announced up to this size are read into one array made for them; a larger one grows as it comes. */
const WHOLE_MAX = 16 << 20;

/** One request on its way: written to a connection, its answer read back. */
export class Exchange {
  connection?: Carrier;
  private head?: Buffer;
  private status = 0;
  private headers: Record<string, string | undefined> = {};
  private framing: Framing = 'length';
  private left = 0;
  private keepAlive = true;
  private chunkState: 'size' | 'data' | 'data-end' | 'trailer' = 'size';
  private line = '';
  private whole?: Uint8Array;
  private filled = 0;
  private parts?: Buffer[];
  private stream?: Readable;
  private settled = false;

  constructor(
    readonly key: string,
    readonly target: HttpTarget,
    readonly request: HttpExchange,
    readonly text: string,
    private readonly resolve: (answer: HttpAnswer) => void,
    private readonly reject: (err: Error) => void,
  ) {}

  /** Bytes from the connection. */
  data(chunk: Buffer): void {
    if (this.stream === undefined && this.whole === undefined && this.parts === undefined) {
      const bytes = this.head ? Buffer.concat([this.head, chunk]) : chunk;
      const end = bytes.indexOf(HEAD_END);
      if (end < 0) {
        if (bytes.length > MAX_HEAD_BYTES) {
          this.fail(malformed('headers too large'));
          return;
        }
        this.head = bytes;
        return;
      }
      this.head = undefined;
      const why = this.readHead(bytes.toString('latin1', 0, end));
      if (why) {
        this.fail(malformed(why));
        return;
      }
      const rest = bytes.subarray(end + 4);
      // An interim answer (100 Continue) precedes the real one.
      if (this.status < 200) {
        if (rest.length > 0) this.data(rest);
        return;
      }
      if (!this.begin()) return;
      if (rest.length > 0) this.body(rest);
      else if (this.framing === 'length' && this.left === 0) this.end();
      return;
    }
    this.body(chunk);
  }

  /** Status line and headers; a reason when they do not parse. */
  private readHead(text: string): string | undefined {
    const lines = text.split('\r\n');
    const status = /^HTTP\/1\.([01]) (\d{3})(?: |$)/.exec(lines[0]);
    if (!status) return `status line ${JSON.stringify(lines[0].slice(0, 40))}`;
    this.status = Number(status[2]);
    // No prototype: a header named `__proto__` is a header like any other.
    const headers: Record<string, string | undefined> = Object.create(null);
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i];
      const colon = line.indexOf(':');
      if (colon <= 0 || line.charCodeAt(0) <= 32) return `header line ${JSON.stringify(line.slice(0, 40))}`;
      const name = line.slice(0, colon).toLowerCase();
      const value = line.slice(colon + 1).trim();
      const had = headers[name];
      headers[name] = had === undefined ? value : `${had}, ${value}`;
    }
    this.headers = headers;
    const tokens = (headers.connection ?? '').toLowerCase().split(',');
    const says = (token: string): boolean => tokens.some((t) => t.trim() === token);
    this.keepAlive = status[1] === '1' ? !says('close') : says('keep-alive');
    return undefined;
  }

  /** Decides how the body is framed and how it is handed over; false when the answer was refused. */
  private begin(): boolean {
    const { headers, status } = this;
    const encoding = headers['transfer-encoding'];
    const length = headers['content-length'];
    if (this.request.method === 'HEAD' || status === 204 || status === 304) {
      this.left = 0;
    } else if (encoding !== undefined) {
      if (encoding.toLowerCase() !== 'chunked') {
        return this.refuse(`transfer-encoding ${encoding}`);
      }
      this.framing = 'chunked';
    } else if (length !== undefined) {
      if (!/^\d{1,15}$/.test(length)) {
        return this.refuse(`content-length ${length}`);
      }
      this.left = Number(length);
    } else {
      this.framing = 'until-close';
      this.keepAlive = false;
    }
    const over = this.request.streamOver;
    const known = this.framing === 'length';
    if (over !== undefined && status >= 200 && status < 300 && (!known || this.left > over)) {
      const connection = this.connection;
      this.stream = new Readable({ read: () => connection?.socket.resume() });
      this.stream.on('close', () => this.settled || this.connection?.socket.destroy());
      this.resolve({ status, headers, stream: this.stream });
    } else if (known && this.left <= WHOLE_MAX) {
      this.whole = new Uint8Array(this.left);
    } else {
      this.parts = [];
    }
    return true;
  }

  private refuse(why: string): false {
    this.fail(malformed(why));
    return false;
  }

  private body(chunk: Buffer): void {
    if (this.framing === 'chunked') {
      this.chunked(chunk);
      return;
    }
    if (this.framing === 'until-close') {
      this.take(chunk);
      return;
    }
    if (chunk.length > this.left) {
      // Bytes past the answer: the connection cannot be trusted with another exchange.
      this.keepAlive = false;
      chunk = chunk.subarray(0, this.left);
    }
    this.left -= chunk.length;
    this.take(chunk);
    if (this.left === 0) this.end();
  }

  /** A chunked body: sizes in hexadecimal, each on a line before its bytes; trailers after the last. */
  private chunked(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length && !this.settled) {
      if (this.chunkState === 'data') {
        const n = Math.min(this.left, chunk.length - at);
        this.take(chunk.subarray(at, at + n));
        at += n;
        this.left -= n;
        if (this.left === 0) this.chunkState = 'data-end';
        continue;
      }
      const nl = chunk.indexOf(10, at);
      const piece = chunk.toString('latin1', at, nl < 0 ? chunk.length : nl + 1);
      at = nl < 0 ? chunk.length : nl + 1;
      this.line += piece;
      if (nl < 0) {
        if (this.line.length > 4096) {
          this.fail(malformed('chunk line too long'));
          return;
        }
        continue;
      }
      const line = this.line.replace(/\r?\n$/, '');
      this.line = '';
      if (this.chunkState === 'data-end') {
        if (line !== '') {
          this.fail(malformed('chunk not followed by a line break'));
          return;
        }
        this.chunkState = 'size';
      } else if (this.chunkState === 'size') {
        const size = /^([0-9a-fA-F]{1,12})(?:[ \t]*;.*)?$/.exec(line);
        if (!size) {
          this.fail(malformed(`chunk size ${JSON.stringify(line.slice(0, 20))}`));
          return;
        }
        this.left = Number.parseInt(size[1], 16);
        this.chunkState = this.left === 0 ? 'trailer' : 'data';
      } else if (line === '') {
        if (at < chunk.length) this.keepAlive = false;
        this.end();
        return;
      }
    }
  }

  private take(chunk: Buffer): void {
    if (chunk.length === 0) return;
    if (this.stream) {
      if (!this.stream.push(chunk)) this.connection?.socket.pause();
    } else if (this.whole) {
      this.whole.set(chunk, this.filled);
      this.filled += chunk.length;
    } else this.parts?.push(chunk);
  }

  /** The answer ended: hand it over and free the connection. */
  private end(): void {
    if (this.settled) return;
    this.settled = true;
    const connection = this.connection;
    this.connection = undefined;
    if (this.stream) this.stream.push(null);
    else {
      const { whole, filled } = this;
      const body = whole ? Buffer.from(whole.buffer, 0, filled) : Buffer.concat(this.parts ?? []);
      this.resolve({ status: this.status, headers: this.headers, body });
    }
    connection?.finished(this.keepAlive);
  }

  /** The connection ended: ends an answer framed by that end; false when the answer is not whole. */
  endsWithClose(): boolean {
    if (this.framing !== 'until-close' || !(this.stream || this.parts)) return false;
    this.end();
    return true;
  }

  /** Fails the exchange (and its stream, once handed over); the connection is not used again. */
  fail(err: Error): void {
    if (this.settled) return;
    this.settled = true;
    const connection = this.connection;
    this.connection = undefined;
    if (connection?.exchange === this) connection.exchange = undefined;
    if (this.stream) this.stream.destroy(err);
    else this.reject(err);
    connection?.socket.destroy();
  }
}
