/**
 * Decoding of `Content-Encoding: aws-chunked` request bodies. The SDK sends
 * them for streamed PutObject bodies (flexible checksums, CRC32 in a
 * trailer): `<hex size>[;chunk-signature=...]\r\n<bytes>\r\n` repeated, a
 * zero-size chunk, then `name:value\r\n` trailer lines and an empty line.
 * Node's HTTP parser has already removed the outer Transfer-Encoding framing.
 */
import { incompleteBody } from './errors';

export interface DecodedChunks {
  readonly body: Buffer;
  /** Trailer headers, names lower-cased (e.g. `x-amz-checksum-crc32`). */
  readonly trailers: ReadonlyMap<string, string>;
}

const CRLF = Buffer.from('\r\n');

export function decodeAwsChunked(raw: Buffer, decodedLength: number | null): DecodedChunks {
  const parts: Buffer[] = [];
  let at = 0;
  let total = 0;
  for (;;) {
    const eol = raw.indexOf(CRLF, at);
    if (eol < 0) throw incompleteBody('aws-chunked body ends inside a chunk header.');
    const header = raw.subarray(at, eol).toString('latin1');
    const size = Number.parseInt(header.split(';', 1)[0], 16);
    if (!Number.isFinite(size) || size < 0) throw incompleteBody(`Bad aws-chunked chunk header: ${header}`);
    at = eol + 2;
    if (size === 0) break;
    if (at + size > raw.length) throw incompleteBody('aws-chunked body ends inside a chunk.');
    parts.push(raw.subarray(at, at + size));
    total += size;
    at += size;
    if (raw.indexOf(CRLF, at) !== at) throw incompleteBody('aws-chunked chunk is not followed by CRLF.');
    at += 2;
  }
  const trailers = new Map<string, string>();
  for (const line of raw.subarray(at).toString('utf8').split('\r\n')) {
    if (!line) continue;
    const colon = line.indexOf(':');
    if (colon > 0) trailers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  if (decodedLength !== null && decodedLength !== total) {
    throw incompleteBody(
      `You did not provide the number of bytes specified by the x-amz-decoded-content-length header (${decodedLength}, got ${total}).`,
    );
  }
  return { body: Buffer.concat(parts, total), trailers };
}
