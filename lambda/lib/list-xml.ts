/**
 * A fast reader for ListObjectsV2 answers. The SDK's generic XML deserialiser costs a full page about as
 * much CPU as a round trip takes; this reads only the few fields a listing needs. Anything it does not
 * recognise makes it answer undefined, and the caller lets
 * the SDK parse the page instead: an unusual answer costs speed, never correctness.
 *
 * It reads the page's bytes: only the fields it returns become strings, each a fresh copy, so an index
 * that keeps a million keys does not also keep the thousand pages they came from.
 *
 * Listings ask for `encoding-type=url`: XML 1.0 cannot carry some characters a key may hold, and its
 * parsers turn a CR into an LF, so a raw key can come back as another key. Keys and common prefixes of an
 * answer that says `<EncodingType>url</EncodingType>` are decoded here (`decodeUrlKey`).
 */

import { AMP, GT, LT, SLASH, Unrecognised, decode, decodeUrlKey, digits, isoTime, keepIso, keptIso, parseIsoTime } from './list-xml-text';

export { decodeUrlKey, isoTime } from './list-xml-text';

/** One listed object, as S3 reports it; `lastModified` in `toISOString`'s form, `etag` without quotes (empty when not read). */
export interface ListedEntry {
  readonly key: string;
  readonly size: number;
  readonly lastModified: string;
  readonly etag: string;
}

/** The fields of a ListObjectsV2 page the indexer uses. */
export interface ListObjectsPage {
  readonly objects: ListedEntry[];
  readonly prefixes: string[];
  readonly isTruncated: boolean;
  readonly nextContinuationToken?: string;
}

/** An element's open and close tags as bytes, built once. */
interface Tag {
  readonly open: Buffer;
  readonly close: Buffer;
}

const tag = (name: string): Tag => ({ open: Buffer.from(`<${name}>`, 'latin1'), close: Buffer.from(`</${name}>`, 'latin1') });
const KEY = tag('Key');
const SIZE = tag('Size');
const LAST_MODIFIED = tag('LastModified');
const ETAG = tag('ETag');
const PREFIX = tag('Prefix');
const CONTENTS = tag('Contents');
const ROOT_CLOSE = Buffer.from('</ListBucketResult>', 'latin1');
const QUOT = Buffer.from('&quot;', 'latin1');

/** True when `pattern` is at `at` in `b`. */
function bytesAt(b: Uint8Array, pattern: Uint8Array, at: number): boolean {
  if (at < 0 || at + pattern.length > b.length) return false;
  for (let i = 0; i < pattern.length; i++) if (b[at + i] !== pattern[i]) return false;
  return true;
}

/**
 * The first `pattern` starting in `from`..`to` of `b`, or -1. Searched here rather than with
 * `Buffer.indexOf`: the spans inside one object are short, and a native call costs more than the search.
 */
function indexIn(b: Uint8Array, pattern: Uint8Array, from: number, to: number): number {
  const first = pattern[0];
  const last = Math.min(to, b.length - pattern.length + 1);
  for (let i = from; i < last; i++) if (b[i] === first && bytesAt(b, pattern, i)) return i;
  return -1;
}

/**
 * One page being read from its bytes, with offsets into them. Nothing turns the whole page into a
 * string: only the fields kept are decoded, each on its own.
 */
class PageReader {
  /** Set when the answer says its keys are URL-encoded. */
  urlEncoded = false;

  constructor(
    readonly bytes: Buffer,
    /** Whether ETags are read; otherwise each object's is empty. */
    private readonly etags: boolean,
  ) {}

  /** A key or prefix as listed: decoded when the answer is URL-encoded. */
  keyText(text: string): string {
    if (!this.urlEncoded) return text;
    const key = decodeUrlKey(text);
    if (key === undefined) throw new Unrecognised('a key that is not valid URL encoding');
    return key;
  }

  /** The decoded text of bytes `from`..`to`, which must hold no markup; a copy, not a slice. */
  text(from: number, to: number): string {
    const b = this.bytes;
    let amp = false;
    let ascii = true;
    for (let i = from; i < to; i++) {
      const c = b[i];
      if (c === LT) throw new Unrecognised('markup inside a text element');
      if (c === AMP) amp = true;
      else if (c > 0x7f) ascii = false;
    }
    const text = b.toString(ascii ? 'latin1' : 'utf8', from, to);
    return amp ? decode(text) : text;
  }

  /** Where the text of the last element `find` found starts and ends. */
  private start = 0;
  private end = 0;

  /** Finds the first `<tag>…</tag>` between `from` and `to`, setting `start` and `end` to its text; false when absent. */
  private find({ open, close }: Tag, from: number, to: number): boolean {
    const at = indexIn(this.bytes, open, from, to);
    if (at < 0) return false;
    this.start = at + open.length;
    this.end = indexIn(this.bytes, close, this.start, to);
    if (this.end < 0) throw new Unrecognised(`unclosed ${open.toString('latin1')}`);
    return true;
  }

  /** The text of the first `<tag>…</tag>` between `from` and `to`, or undefined when absent. */
  textOf(tag: Tag, from: number, to: number): string | undefined {
    return this.find(tag, from, to) ? this.text(this.start, this.end) : undefined;
  }

  /** An ETag without its quotes (as `unquoteEtag` in s3.ts); S3 sends them as `&quot;`, cut out directly. */
  private etagOf(from: number, to: number): string {
    return this.find(ETAG, from, to) ? this.etagAt(this.start, this.end) : '';
  }

  /** The ETag whose text is bytes `start`..`end`, without its quotes. */
  private etagAt(start: number, end: number): string {
    if (end - start > 12 && bytesAt(this.bytes, QUOT, start) && bytesAt(this.bytes, QUOT, end - 6)) {
      const inner = this.text(start + 6, end - 6);
      if (!inner.includes('"')) return inner;
    }
    return this.text(start, end).replace(/^W\//, '').replace(/^"|"$/g, '');
  }

  /**
   * A timestamp as `toISOString` writes it. The usual S3 form is checked digit by digit and kept as written
   * (no Date, no `toISOString`), shared with earlier objects of the same instant; others are read as `Date`
   * reads them and written out again.
   */
  private time(from: number, to: number): string {
    if (!this.find(LAST_MODIFIED, from, to)) throw new Unrecognised('a <Contents> without <LastModified>');
    return this.timeAt(this.start, this.end);
  }

  /** The timestamp whose text is bytes `start`..`end` (see `time`). */
  private timeAt(start: number, end: number): string {
    const ms = parseIsoTime(this.bytes, start, end);
    if (Number.isNaN(ms)) {
      const date = new Date(this.text(start, end));
      if (Number.isNaN(date.getTime())) throw new Unrecognised('a <LastModified> it cannot read');
      return isoTime(date);
    }
    if (end - start !== 24) return isoTime(new Date(ms));
    return keptIso(ms) ?? keepIso(ms, this.bytes.toString('latin1', start, end));
  }

  object(from: number, to: number): ListedEntry {
    const key = this.textOf(KEY, from, to);
    const size = this.find(SIZE, from, to) ? digits(this.bytes, this.start, this.end - this.start) : NaN;
    const lastModified = this.time(from, to);
    if (!key || !Number.isSafeInteger(size)) {
      throw new Unrecognised('a <Contents> without a usable Key, Size or LastModified');
    }
    return { key: this.keyText(key), size, lastModified, etag: this.etags ? this.etagOf(from, to) : '' };
  }

  /**
   * The `<Contents>` whose children start at `from`, read in one pass when its children are flat
   * elements, each field at most once (as S3 writes them); its end (the offset of `</Contents>`) is left
   * in `end`. Undefined for any other shape, which `object` then reads field by field.
   */
  flatObject(from: number): ListedEntry | undefined {
    const b = this.bytes;
    const length = b.length;
    let key = -1;
    let size = -1;
    let time = -1;
    let etag = -1;
    let keyEnd = 0;
    let sizeEnd = 0;
    let timeEnd = 0;
    let etagEnd = 0;
    let i = from;
    for (;;) {
      while (i < length && b[i] !== LT) i++;
      if (i + 1 >= length) return undefined;
      if (b[i + 1] === SLASH) {
        if (!bytesAt(b, CONTENTS.close, i)) return undefined;
        break;
      }
      const name = i + 1;
      let gt = name;
      while (gt < length && b[gt] !== GT && b[gt] !== LT) gt++;
      if (gt >= length || b[gt] !== GT || b[gt - 1] === SLASH) return undefined;
      const nameLength = gt - name;
      const start = gt + 1;
      let end = start;
      while (end < length && b[end] !== LT) end++;
      // Nested markup, or a close tag of another name: not the flat shape.
      if (end + nameLength + 3 > length || b[end + 1] !== SLASH || b[end + 2 + nameLength] !== GT) return undefined;
      for (let j = 0; j < nameLength; j++) if (b[end + 2 + j] !== b[name + j]) return undefined;
      if (nameLength === 3 && bytesAt(b, KEY.open, i)) {
        if (key >= 0) return undefined;
        key = start;
        keyEnd = end;
      } else if (nameLength === 4 && bytesAt(b, SIZE.open, i)) {
        if (size >= 0) return undefined;
        size = start;
        sizeEnd = end;
      } else if (nameLength === 12 && bytesAt(b, LAST_MODIFIED.open, i)) {
        if (time >= 0) return undefined;
        time = start;
        timeEnd = end;
      } else if (nameLength === 4 && bytesAt(b, ETAG.open, i)) {
        if (etag >= 0) return undefined;
        etag = start;
        etagEnd = end;
      }
      i = end + nameLength + 3;
    }
    this.end = i;
    if (time < 0) throw new Unrecognised('a <Contents> without <LastModified>');
    const keyText = key >= 0 ? this.text(key, keyEnd) : undefined;
    const sizeValue = size >= 0 ? digits(b, size, sizeEnd - size) : NaN;
    const lastModified = this.timeAt(time, timeEnd);
    if (!keyText || !Number.isSafeInteger(sizeValue)) {
      throw new Unrecognised('a <Contents> without a usable Key, Size or LastModified');
    }
    return { key: this.keyText(keyText), size: sizeValue, lastModified, etag: etag >= 0 && this.etags ? this.etagAt(etag, etagEnd) : '' };
  }

  /** Where the last `flatObject` ended. */
  objectEnd(): number {
    return this.end;
  }

  /** The index of `</name>` at or after `from`. */
  closeOf(name: string, from: number): number {
    const close = this.bytes.indexOf(name === 'Contents' ? CONTENTS.close : `</${name}>`, from, 'latin1');
    if (close < 0) throw new Unrecognised(`unclosed <${name}>`);
    return close;
  }

  /** The index of the first `byte` at or after `from`, or -1. */
  next(byte: number, from: number): number {
    const b = this.bytes;
    for (let i = from; i < b.length; i++) if (b[i] === byte) return i;
    return -1;
  }
}

const URL_ENCODED = Buffer.from('<EncodingType>url</EncodingType>', 'latin1');

/**
 * True when the page may hold CDATA or a comment. Both open with `<!`: a page without a `!` (found by a
 * native scan for one byte, where a search for `<![CDATA[` stops at every tag) holds neither.
 */
function hasMarkupDeclaration(bytes: Buffer): boolean {
  return bytes.includes(0x21) && (bytes.includes('<![CDATA[') || bytes.includes('<!--'));
}

/**
 * Whether the answer says its keys are URL-encoded, known before the first key is read. Stores write
 * `<EncodingType>` before or after the objects, so only the bytes before the first `<Contents>` and after
 * the last `</Contents>` are searched; one written among them is refused where the parse meets it.
 */
function saysUrlEncoded(bytes: Buffer): boolean {
  const first = bytes.indexOf(CONTENTS.open);
  if (first < 0) return bytes.includes(URL_ENCODED);
  if (bytes.subarray(0, first).includes(URL_ENCODED)) return true;
  return bytes.subarray(bytes.lastIndexOf(CONTENTS.close)).includes(URL_ENCODED);
}

/**
 * Reads a ListObjectsV2 answer (`<ListBucketResult>`), or answers undefined when the document is anything
 * else or uses XML this reader does not handle (CDATA, comments, an encoding other than `url`, unknown entities).
 * Without `etags`, each object's ETag is left empty, unread.
 */
export function parseListObjectsV2(body: Uint8Array | string, etags = true): ListObjectsPage | undefined {
  let bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  // XML parsers turn CR LF and lone CR into LF before anything else; so does the SDK.
  if (bytes.includes(0x0d)) bytes = Buffer.from(bytes.toString('utf8').replace(/\r\n?/g, '\n'), 'utf8');
  const page = new PageReader(bytes, etags);
  try {
    const rootOpen = bytes.indexOf('<ListBucketResult');
    if (rootOpen < 0 || hasMarkupDeclaration(bytes)) return undefined;
    let at = page.next(GT, rootOpen) + 1;
    if (at <= 0 || bytes[at - 2] === SLASH) return undefined;
    page.urlEncoded = saysUrlEncoded(bytes);
    const objects: ListedEntry[] = [];
    const prefixes: string[] = [];
    let isTruncated: boolean | undefined;
    let nextContinuationToken: string | undefined;
    for (;;) {
      const open = page.next(LT, at);
      if (open < 0) return undefined;
      if (bytesAt(bytes, ROOT_CLOSE, open)) break;
      // The usual element, told without making a string of its name.
      if (bytesAt(bytes, CONTENTS.open, open)) {
        const inner = open + CONTENTS.open.length;
        const flat = page.flatObject(inner);
        const close = flat ? page.objectEnd() : page.closeOf('Contents', inner);
        objects.push(flat ?? page.object(inner, close));
        at = close + CONTENTS.close.length;
        continue;
      }
      const nameEnd = page.next(GT, open);
      if (nameEnd < 0) return undefined;
      const name = bytes.toString('latin1', open + 1, nameEnd);
      if (name.endsWith('/')) {
        at = nameEnd + 1;
        continue;
      }
      if (name !== 'Contents' && !/^[A-Za-z]+$/.test(name)) return undefined;
      const close = page.closeOf(name, nameEnd);
      const inner = nameEnd + 1;
      if (name === 'Contents') objects.push(page.object(inner, close));
      else if (name === 'CommonPrefixes') {
        const prefix = page.textOf(PREFIX, inner, close);
        if (prefix !== undefined) prefixes.push(page.keyText(prefix));
      } else if (name === 'IsTruncated') isTruncated = page.text(inner, close).trim() === 'true';
      else if (name === 'NextContinuationToken') nextContinuationToken = page.text(inner, close);
      // Met among the objects, where `saysUrlEncoded` does not look: the keys before it were read as not encoded.
      else if (name === 'EncodingType' && (page.text(inner, close) !== 'url' || !page.urlEncoded)) return undefined;
      at = close + name.length + 3;
    }
    if (isTruncated === undefined || (isTruncated && !nextContinuationToken)) return undefined;
    return { objects, prefixes, isTruncated, nextContinuationToken };
  } catch (err) {
    if (err instanceof Unrecognised) return undefined;
    throw err;
  }
}
