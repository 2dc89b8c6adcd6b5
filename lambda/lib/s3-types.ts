/** The shapes of the S3 seam's requests and answers, shared by `S3Store` and the ways it sends a listing page. */
import type { Readable } from 'node:stream';

/** An object's metadata; `etag` without quotes. */
export interface ObjectInfo {
  readonly size: number;
  readonly etag: string;
  readonly lastModified: Date;
}

/** An object opened for reading: its metadata and either its bytes, read whole, or a stream of them. */
export type OpenedObject =
  | { readonly info: ObjectInfo; readonly body: Buffer; readonly stream?: undefined }
  | { readonly info: ObjectInfo; readonly stream: Readable; readonly body?: undefined };

/** An object's bytes and metadata. */
export interface StoredObject extends ObjectInfo {
  readonly body: Buffer;
  /** Set (with an empty body) when the read was conditional (`ifNoneMatch`) and the object still has that ETag. */
  readonly notModified?: true;
}

/** One ListObjectsV2 page: objects with full keys and `toISOString` times, and common prefixes when a delimiter was given. */
export interface ListPage {
  readonly objects: { key: string; size: number; lastModified: string; etag: string }[];
  readonly prefixes: string[];
  /** True when more pages follow (set by `S3Store.listPages`). */
  readonly truncated?: boolean;
}

/** Create only (`If-None-Match: *`) or replace only that version (`If-Match`). */
export type WriteCondition = { readonly ifNoneMatch: '*' } | { readonly ifMatch: string };

/** A conditional write either lands or loses its race (412). */
export type WriteResult = { readonly status: 'written'; readonly etag: string } | { readonly status: 'conflict' };

/** Options of a read. */
export interface GetOptions {
  readonly ifNoneMatch?: string;
  readonly abortSignal?: AbortSignal;
  /** Called with the object's size before its body is read; a throw stops the read and is the one thrown. */
  readonly beforeBody?: (bytes: number) => void;
}

/** Options of a listing. */
export interface ListOptions {
  readonly prefix: string;
  readonly startAfter?: string;
  readonly delimiter?: string;
  readonly maxKeys?: number;
  /** Whether objects carry their ETags; without, `etag` is empty and a page costs less CPU to read. @default true */
  readonly etags?: boolean;
}
