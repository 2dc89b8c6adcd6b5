/**
 * The direct path's own HTTP/1.1 connections (`s3-http.ts`) against real servers on loopback: node's http
 * and https servers for what S3 sends, and raw TCP servers for what only a broken or unusual server sends.
 */
import { readFileSync } from 'node:fs';
import { type IncomingMessage, type Server, type ServerResponse, createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { type AddressInfo, type Socket, createServer as createTcpServer } from 'node:net';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { type HttpAnswer, HttpPool, type HttpTarget } from '../../lambda/lib/s3-http';

const TLS_DIR = join(__dirname, '..', 'helpers', 'tls');

const servers: { close(): void }[] = [];
const pools: HttpPool[] = [];
afterEach(() => {
  for (const p of pools.splice(0)) p.destroy();
  for (const s of servers.splice(0)) s.close();
});

function pool(options: Partial<ConstructorParameters<typeof HttpPool>[0]> = {}): HttpPool {
  const p = new HttpPool({ maxSockets: 8, connectionTimeoutMs: 2000, requestTimeoutMs: 2000, where: 'the test server', ...options });
  pools.push(p);
  return p;
}

/** An http server on loopback counting the connections it accepts. */
async function httpServer(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ target: HttpTarget; connections: () => number; dropConnections: () => void }> {
  let connections = 0;
  const server: Server = createHttpServer(handler);
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push({
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  });
  return {
    target: { protocol: 'http:', hostname: '127.0.0.1', port: (server.address() as AddressInfo).port },
    connections: () => connections,
    dropConnections: () => server.closeAllConnections(),
  };
}

/** A TCP server that answers every request it reads with `answer(requestNumber)` bytes, as written. */
async function rawServer(
  answer: (n: number, socket: Socket) => string | undefined,
): Promise<{ target: HttpTarget; connections: () => number }> {
  let connections = 0;
  let n = 0;
  const sockets: Socket[] = [];
  const server = createTcpServer((socket) => {
    connections++;
    sockets.push(socket);
    socket.setNoDelay(true);
    let pending = '';
    socket.on('data', (chunk) => {
      pending += chunk.toString('latin1');
      while (pending.includes('\r\n\r\n')) {
        pending = pending.slice(pending.indexOf('\r\n\r\n') + 4);
        const text = answer(++n, socket);
        if (text !== undefined) socket.write(text, 'latin1');
      }
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push({
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  });
  return {
    target: { protocol: 'http:', hostname: '127.0.0.1', port: (server.address() as AddressInfo).port },
    connections: () => connections,
  };
}

const get = (path = '/k', streamOver?: number) => ({ method: 'GET' as const, path, headers: { host: 'test' }, streamOver });

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function failure(answer: Promise<HttpAnswer>): Promise<Error & { code?: string }> {
  return answer.then(
    () => {
      throw new Error('the exchange should have failed');
    },
    (err: Error & { code?: string }) => err,
  );
}

describe('kept-alive connections', () => {
  it('sends one exchange after another over one connection, and never more than maxSockets at once', async () => {
    const seen: string[] = [];
    const server = await httpServer((req, res) => {
      seen.push(`${req.method} ${req.url} ${req.headers['x-amz-date']}`);
      setTimeout(() => res.end(`body of ${req.url}`), 5);
    });
    const p = pool({ maxSockets: 3 });
    for (let i = 0; i < 5; i++) {
      const answer = await p.send(server.target, { method: 'GET', path: `/one/${i}`, headers: { host: 'h', 'x-amz-date': 'd' } });
      expect(answer.body?.toString()).toBe(`body of /one/${i}`);
    }
    expect(server.connections()).toBe(1);

    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => p.send(server.target, get(`/many/${i}`))));

    expect(answers.map((a) => a.body?.toString())).toEqual(Array.from({ length: 30 }, (_, i) => `body of /many/${i}`));
    expect(server.connections()).toBe(3);
    expect(seen[0]).toBe('GET /one/0 d');
  });

  it('opens a new connection when the server closed the one it kept', async () => {
    const server = await httpServer((_req, res) => res.end('ok'));
    const p = pool();
    expect((await p.send(server.target, get())).body?.toString()).toBe('ok');
    server.dropConnections();
    await new Promise((resolve) => setTimeout(resolve, 50));

    expect((await p.send(server.target, get())).body?.toString()).toBe('ok');
    expect(server.connections()).toBe(2);
  });

  it('does not use a connection again after Connection: close, HTTP/1.0 or bytes past the answer', async () => {
    const server = await rawServer((n) => {
      if (n === 1) return 'HTTP/1.1 200 OK\r\nConnection: TE, Close\r\ncontent-length: 1\r\n\r\na';
      if (n === 2) return 'HTTP/1.0 200 OK\r\ncontent-length: 1\r\n\r\nb';
      if (n === 3) return 'HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\ncHTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nx';
      return 'HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nd';
    });
    const p = pool();
    const bodies: string[] = [];
    for (let i = 0; i < 5; i++) bodies.push(String((await p.send(server.target, get())).body));

    expect(bodies).toEqual(['a', 'b', 'c', 'd', 'd']);
    expect(server.connections()).toBe(4);
  });
});

describe('answers', () => {
  it('reads a body framed by its length, in chunks, or by the end of the connection; a HEAD and a 204 have none', async () => {
    const server = await rawServer((n) => {
      if (n === 1) return 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nETag: "e"\r\nX-Twice: a\r\nx-twice: b\r\n__proto__: p\r\n\r\nhello';
      if (n === 2)
        return 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nTrailer: x\r\n\r\n';
      if (n === 3) return 'HTTP/1.1 200 OK\r\ncontent-length: 7\r\n\r\n';
      if (n === 4) return 'HTTP/1.1 204 No Content\r\n\r\n';
      return 'HTTP/1.1 200 OK\r\n\r\nuntil the end';
    });
    const p = pool({ maxSockets: 1 });

    const whole = await p.send(server.target, get());
    expect([whole.status, whole.body?.toString(), whole.headers.etag, whole.headers['x-twice']]).toEqual([200, 'hello', '"e"', 'a, b']);
    expect(Object.entries(whole.headers)).toContainEqual(['__proto__', 'p']);
    expect((await p.send(server.target, get())).body?.toString()).toBe('abc0123456789abcdef');
    const head = await p.send(server.target, { method: 'HEAD', path: '/k', headers: {} });
    expect([head.headers['content-length'], head.body?.length]).toEqual(['7', 0]);
    expect((await p.send(server.target, get())).status).toBe(204);
    const untilClose = p.send(server.target, get());
    await new Promise((resolve) => setTimeout(resolve, 50));
    for (const s of servers.splice(0)) s.close();
    expect((await untilClose).body?.toString()).toBe('until the end');
    expect(server.connections()).toBe(1);
  });

  it('skips an interim 100 Continue, and reads an answer that comes a byte at a time', async () => {
    const text = 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n';
    const server = await rawServer((_n, socket) => {
      let at = 0;
      const next = (): void => {
        if (at < text.length) socket.write(text[at++], 'latin1', next);
      };
      next();
      return undefined;
    });
    const answer = await pool().send(server.target, get());

    expect([answer.status, answer.body?.toString()]).toEqual([200, 'ab']);
  });

  it('reads a body up to streamOver whole, into memory of its own, and hands a longer one over as a stream', async () => {
    const big = Buffer.alloc(6 << 20, 7);
    const server = await httpServer((req, res) => {
      if (req.url === '/small') res.end('small body');
      else if (req.url === '/chunked') {
        res.write('a');
        res.end('b');
      } else res.end(big);
    });
    const p = pool();

    const small = await p.send(server.target, get('/small', 10));
    expect(small.body?.toString()).toBe('small body');
    expect(small.body?.byteLength).toBe(small.body?.buffer.byteLength);
    const large = await p.send(server.target, get('/big', 10));
    expect(large.body).toBeUndefined();
    // Unread, the stream holds little: the socket is paused while it is full, and no byte is lost.
    const stream = large.stream as Readable;
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(stream.readableLength).toBeLessThan(1 << 20);
    const read = await readAll(stream);
    expect([read.length, read.every((b) => b === 7)]).toEqual([big.length, true]);
    const chunked = await p.send(server.target, get('/chunked', 10));
    expect((await readAll(chunked.stream as Readable)).toString()).toBe('ab');
    expect(server.connections()).toBe(1);
  });

  it('reads an error answer whole, streamOver or not', async () => {
    const server = await httpServer((_req, res) => {
      res.writeHead(404, { 'content-type': 'application/xml' });
      res.end('<Error><Code>NoSuchKey</Code></Error>');
    });
    const answer = await pool().send(server.target, get('/k', 0));

    expect([answer.status, answer.stream, answer.body?.toString()]).toEqual([404, undefined, '<Error><Code>NoSuchKey</Code></Error>']);
  });
});

describe('failures', () => {
  it.each([
    ['a status line that is not HTTP/1.1', 'HTP/1.1 200 OK\r\n\r\n', 'status line'],
    ['a header line without a colon', 'HTTP/1.1 200 OK\r\nnot a header\r\n\r\n', 'header line'],
    ['a folded header line', 'HTTP/1.1 200 OK\r\na: b\r\n c\r\n\r\n', 'header line'],
    ['a content-length that is not a number', 'HTTP/1.1 200 OK\r\ncontent-length: 5x\r\n\r\n', 'content-length'],
    ['two content-lengths', 'HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 1\r\n\r\na', 'content-length'],
    ['a transfer-encoding other than chunked', 'HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n', 'transfer-encoding'],
    ['a chunk size that is not hexadecimal', 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n', 'chunk size'],
    ['a chunk longer than announced', 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\nab\r\n0\r\n\r\n', 'line break'],
    ['headers past 64 KiB', `HTTP/1.1 200 OK\r\nx: ${'a'.repeat(70_000)}`, 'too large'],
  ])('refuses %s, never retried (HPE_INVALID)', async (_name, text, why) => {
    const server = await rawServer(() => text);
    const err = await failure(pool().send(server.target, get()));

    expect(err.code).toBe('HPE_INVALID');
    expect(err.message).toContain(why);
  });

  it('fails an answer cut short as a reset (ECONNRESET), read whole or streamed', async () => {
    const server = await rawServer((n, socket) => {
      socket.end(`HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n${n === 1 ? '' : 'x'.repeat(50)}`);
      return undefined;
    });
    const p = pool();
    expect((await failure(p.send(server.target, get()))).code).toBe('ECONNRESET');
    const streamed = await p.send(server.target, get('/k', 10));
    const err = await readAll(streamed.stream as Readable).then(
      () => undefined,
      (e: Error & { code?: string }) => e,
    );
    expect(err?.code).toBe('ECONNRESET');
  });

  it('fails a silent server with a TimeoutError naming the endpoint, and a refused connection with ECONNREFUSED', async () => {
    const server = await rawServer(() => undefined);
    const err = await failure(pool({ requestTimeoutMs: 100 }).send(server.target, get()));
    expect([err.name, err.message]).toEqual(['TimeoutError', 'no answer from the test server within 100 ms (request timed out)']);

    const closed = await rawServer(() => undefined);
    for (const s of servers.splice(0)) s.close();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await failure(pool().send(closed.target, get()))).code).toBe('ECONNREFUSED');
  });

  it('refuses a header or path that would break the request, sending nothing', async () => {
    const server = await rawServer(() => 'HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n');
    const p = pool();
    const header = await failure(p.send(server.target, { method: 'GET', path: '/k', headers: { 'x-a': 'v\r\nx-injected: 1' } }));
    const path = await failure(p.send(server.target, { method: 'GET', path: '/a b', headers: {} }));

    expect(header.code).toBe('ERR_INVALID_CHAR');
    expect(path.code).toBe('HPE_INVALID');
    expect(server.connections()).toBe(0);
  });

  it('fails queued exchanges when destroyed', async () => {
    const server = await rawServer(() => undefined);
    const p = pool({ maxSockets: 1 });
    const first = failure(p.send(server.target, get()));
    const queued = failure(p.send(server.target, get()));
    await new Promise((resolve) => setTimeout(resolve, 20));
    p.destroy();

    expect((await queued).message).toBe('the client was destroyed');
    expect((await first).code).toBe('ECONNRESET');
  });
});

describe('TLS', () => {
  it('sends over TLS, checking the server’s certificate and name', async () => {
    const key = readFileSync(join(TLS_DIR, 'localhost.key'));
    const cert = readFileSync(join(TLS_DIR, 'localhost.crt'));
    const server = createHttpsServer({ key, cert }, (req, res) => res.end(`secure ${req.url}`));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push({
      close: () => {
        server.closeAllConnections();
        server.close();
      },
    });
    const port = (server.address() as AddressInfo).port;

    const trusted = pool({ tls: { ca: cert } });
    const byName = await trusted.send({ protocol: 'https:', hostname: 'localhost', port }, get('/a'));
    const byAddress = await trusted.send({ protocol: 'https:', hostname: '127.0.0.1', port }, get('/b'));
    expect([byName.body?.toString(), byAddress.body?.toString()]).toEqual(['secure /a', 'secure /b']);

    const untrusted = await failure(pool().send({ protocol: 'https:', hostname: 'localhost', port }, get()));
    expect(untrusted.code).toMatch(/CERT|SELF_SIGNED/);
  });
});
