/**
 * Every module of the library, for the project's own code (handler, command, tests, bench). The
 * package exports `./index` and `./event-api` instead: curated surfaces without these internals.
 */
export * from './errors';
export * from './names';
export * from './keys';
export * from './scope';
export * from './config';
export * from './index-file';
export * from './json-text';
export * from './drift';
export * from './events';
export * from './s3';
export * from './s3-client';
export * from './s3-errors';
export * from './s3-direct';
export * from './s3-endpoint';
export * from './s3-pages';
export * from './list';
export * from './memory';
export * from './key-space';
export * from './parallel-list';
export * from './lock';
export * from './layouts/types';
export * from './layouts/manifest';
export * from './layouts/read';
export * from './layouts/write';
export * from './layouts/shards';
export * from './layouts/mirror';
export * from './publish';
export * from './heal';
export * from './empty-root';
export * from './hydrate';
export * from './cache-files';
export * from './concurrency';
export * from './notifications';
export * from './namespaces';
export * from './delta';
export * from './observe';
export * from './repair';
