/**
 * S3's XML: the ListObjectsV2 result and the error document. Element names
 * and order follow S3's responses; the SDK's parser is what reads them.
 */
import type { ListPage } from './store';

const HEADER = '<?xml version="1.0" encoding="UTF-8"?>\n';
const NS = 'http://s3.amazonaws.com/doc/2006-03-01/';

/** A character `escapeXml` replaces. */
const NEEDS_ESCAPE = /[&<>"'\u0000-\u0008\u000b-\u001f]/;
/** Text `urlEncodeKey` leaves as it is: unreserved characters and `/`. */
const URL_PLAIN = /^[A-Za-z0-9\-_.~/]*$/;

/**
 * Escapes text content. Besides the five entities, control characters become
 * character references, as S3 writes them: a raw CR would be turned into LF
 * by any XML parser and the key would come back changed.
 */
export function escapeXml(text: string): string {
  if (!NEEDS_ESCAPE.test(text)) return text;
  return text.replace(/[&<>"'\u0000-\u0008\u000b-\u001f]/g, (c) => {
    switch (c) {
      case '&':
        return '&amp;';
      case '<':
        return '&lt;';
      case '>':
        return '&gt;';
      case '"':
        return '&quot;';
      case "'":
        return '&apos;';
      default:
        return `&#x${c.charCodeAt(0).toString(16).toUpperCase()};`;
    }
  });
}

/**
 * `encoding-type=url` as S3 does it: UTF-8 percent-encoding that keeps
 * unreserved characters and `/`, and writes a space as `+` (so a literal `+`
 * is `%2B`). Clients must form-decode; a plain percent-decode turns S3's `+`
 * back into a plus and loses the space.
 */
export function urlEncodeKey(text: string): string {
  if (URL_PLAIN.test(text)) return text;
  return encodeURIComponent(text)
    .replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
    .replace(/%2F/g, '/')
    .replace(/%20/g, '+');
}

/** An ETag as S3 writes it, quoted hex (a multipart one ends in `-N`). */
const PLAIN_ETAG = /^"[0-9a-f]*(?:-[0-9]+)?"$/;

/** An ETag escaped as text content: the usual quoted hex without a regular expression's replace. */
function etagXml(etag: string): string {
  return PLAIN_ETAG.test(etag) ? `&quot;${etag.slice(1, -1)}&quot;` : escapeXml(etag);
}

const DAY_MS = 86_400_000;
/** The date part of recent days (`2026-05-01T`), by day number: a listing's times fall on few days. */
const isoDays = new Map<number, string>();
/** `hh:mm:ss.` by second of the day, made once each: a listing's keys rarely share a second, but days repeat them. */
const isoSeconds: (string | undefined)[] = new Array(86_400);
/** `000Z`..`999Z`. */
const isoMillis: string[] = Array.from({ length: 1000 }, (_, i) => `${String(i).padStart(3, '0')}Z`);

/**
 * S3's timestamp form in XML: ISO 8601 with milliseconds. Put together from parts made once, since a
 * `Date` per listed key costs the model more CPU than the rest of the page, CPU real S3 spends on its own
 * machines rather than beside the client measured.
 */
export function isoTime(ms: number): string {
  if (!Number.isInteger(ms) || ms < 0 || ms >= 253_402_300_800_000) return new Date(ms).toISOString();
  const day = Math.floor(ms / DAY_MS);
  let date = isoDays.get(day);
  if (date === undefined) {
    if (isoDays.size >= 4096) isoDays.clear();
    date = new Date(day * DAY_MS).toISOString().slice(0, 11);
    isoDays.set(day, date);
  }
  const inDay = ms - day * DAY_MS;
  const second = Math.floor(inDay / 1000);
  let time = isoSeconds[second];
  if (time === undefined) {
    time = new Date(second * 1000).toISOString().slice(11, 20);
    isoSeconds[second] = time;
  }
  return date + time + isoMillis[inDay - second * 1000];
}

export interface ListResultInput {
  readonly bucket: string;
  readonly prefix: string;
  readonly delimiter: string;
  readonly maxKeys: number;
  readonly startAfter: string | null;
  readonly continuationToken: string | null;
  readonly nextContinuationToken: string | null;
  readonly encodingType: 'url' | null;
  /** Set when the request said `fetch-owner=true`. */
  readonly owner: { readonly id: string; readonly name: string } | null;
  readonly page: ListPage;
}

export function listBucketResultXml(input: ListResultInput): string {
  const { page, owner } = input;
  const enc = (s: string): string => escapeXml(input.encodingType === 'url' ? urlEncodeKey(s) : s);
  const parts: string[] = [HEADER, `<ListBucketResult xmlns="${NS}">`];
  parts.push(`<Name>${escapeXml(input.bucket)}</Name>`);
  parts.push(`<Prefix>${enc(input.prefix)}</Prefix>`);
  if (input.continuationToken !== null) {
    parts.push(`<ContinuationToken>${escapeXml(input.continuationToken)}</ContinuationToken>`);
  }
  if (input.nextContinuationToken !== null) {
    parts.push(`<NextContinuationToken>${escapeXml(input.nextContinuationToken)}</NextContinuationToken>`);
  }
  parts.push(`<KeyCount>${page.contents.length + page.commonPrefixes.length}</KeyCount>`);
  parts.push(`<MaxKeys>${input.maxKeys}</MaxKeys>`);
  if (input.delimiter) parts.push(`<Delimiter>${enc(input.delimiter)}</Delimiter>`);
  if (input.encodingType) parts.push(`<EncodingType>${input.encodingType}</EncodingType>`);
  parts.push(`<IsTruncated>${page.isTruncated}</IsTruncated>`);
  if (input.startAfter !== null) parts.push(`<StartAfter>${enc(input.startAfter)}</StartAfter>`);
  for (const { key, object } of page.contents) {
    parts.push(
      `<Contents><Key>${enc(key)}</Key><LastModified>${isoTime(object.lastModifiedMs)}</LastModified>` +
        `<ETag>${etagXml(object.etag)}</ETag>` +
        (object.checksum ? `<ChecksumAlgorithm>${object.checksum.algorithm}</ChecksumAlgorithm>` : '') +
        `<Size>${object.size}</Size>` +
        (owner ? `<Owner><ID>${owner.id}</ID><DisplayName>${escapeXml(owner.name)}</DisplayName></Owner>` : '') +
        '<StorageClass>STANDARD</StorageClass></Contents>',
    );
  }
  for (const prefix of page.commonPrefixes) {
    parts.push(`<CommonPrefixes><Prefix>${enc(prefix)}</Prefix></CommonPrefixes>`);
  }
  parts.push('</ListBucketResult>');
  return parts.join('');
}

export function errorXml(
  code: string,
  message: string,
  fields: ReadonlyArray<readonly [string, string]>,
  requestId: string,
  hostId: string,
): string {
  const extra = fields.map(([name, value]) => `<${name}>${escapeXml(value)}</${name}>`).join('');
  return (
    `${HEADER}<Error><Code>${code}</Code><Message>${escapeXml(message)}</Message>${extra}` +
    `<RequestId>${requestId}</RequestId><HostId>${escapeXml(hostId)}</HostId></Error>`
  );
}
