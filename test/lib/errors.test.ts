/** Error names: each class carries a literal `name`, so a minified bundle still logs `LockBusyError`, not `Zn`. */
import * as lib from '../../lambda/lib/internal';
import { UnknownTriggerError } from '../../lambda/handler/triggers';

const errorClasses = [...(Object.values(lib) as unknown[]), UnknownTriggerError].filter(
  (value): value is new (...args: unknown[]) => lib.IndexerError => typeof value === 'function' && value.prototype instanceof Error,
);

describe('error names', () => {
  it('finds the typed errors', () => {
    expect(errorClasses.map((c) => c.name)).toEqual(
      expect.arrayContaining(['IndexerError', 'LockBusyError', 'UnexpectedError', 'UnknownTriggerError']),
    );
  });

  it.each(errorClasses.map((c) => [c.name, c] as const))('%s names itself with a literal of its own', (name, ErrorClass) => {
    const error = new ErrorClass('key', 'holder', { name: 'TypeError', message: 'm' });
    expect(error.name).toBe(name);
    expect(String(error)).toMatch(new RegExp(`^${name}: `));
  });
});
