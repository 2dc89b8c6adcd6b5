/** A `DatastoreIndexer` prop (or app context value) is invalid; `prop` names it. */
export class DatastoreIndexerPropError extends Error {
  constructor(
    readonly prop: string,
    detail: string,
  ) {
    super(`Invalid ${prop}: ${detail}`);
    this.name = 'DatastoreIndexerPropError';
  }
}
