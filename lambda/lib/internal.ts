/**
 * Every module of the library, for the project's own code (handler, command, tests, bench). The
 * package exports `./index` instead: a curated surface without these internals.
 */
export * from './errors';
export * from './keys';
export * from './root';
export * from './index-file';
export * from './drift';
export * from './events';
export * from './s3';
export * from './list';
export * from './lock';
export * from './live-index';
export * from './publish';
export * from './heal';
export * from './hydrate';
export * from './concurrency';
export * from './notifications';
export * from './namespaces';
export * from './delta';
export * from './repair';
