/** Parsing an index as the package exports it: each entry is checked by the format's own rule, which is no parameter of the public surface. */
import { type ParsedIndex, parseIndex as parseIndexFile } from './index-file';

/** Parses index bytes, telling a valid index from bad JSON, a wrong version or a wrong shape. */
export function parseIndex(bytes: Uint8Array | string): ParsedIndex {
  return parseIndexFile(bytes);
}
