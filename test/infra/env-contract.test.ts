/** The Lambda's environment contract: the construct sets exactly the variables the handler reads, from one module. */
import { INDEXER_ENV, RUNTIME_ENV, TUNING_ENV } from '../../lambda/env';
import { parseConfig } from '../../lambda/handler/config';
import { memoryBudget } from '../../lambda/lib/memory';
import { indexerStack, propsOf } from './helpers';

/** The variables `read` reads from `env`, recorded as it reads them. */
function readsOf(env: Record<string, string>, read: (env: Record<string, string>) => unknown = parseConfig): Set<string> {
  const reads = new Set<string>();
  const recording = new Proxy(env, {
    get(target, name) {
      if (typeof name === 'string') reads.add(name);
      return target[name as string];
    },
  });
  read(recording);
  return reads;
}

describe('the Lambda environment contract', () => {
  test('the construct sets the contract variables and no other of its own', () => {
    // GIVEN / WHEN
    const { template } = indexerStack({ prefixes: ['swamp'] });
    const fn = propsOf(template, 'AWS::Lambda::Function', 'IndexerFunction') as { Environment: { Variables: Record<string, unknown> } };
    // THEN
    const set = Object.keys(fn.Environment.Variables).filter((name) => name !== 'NODE_OPTIONS');
    expect(set.sort()).toEqual(Object.values(INDEXER_ENV).sort());
  });

  test('the handler reads every variable the construct sets for it, and only variables the contract names', () => {
    // GIVEN the environment the construct gives the function
    const env = {
      [INDEXER_ENV.bucket]: 'shared-bucket',
      [INDEXER_ENV.prefixes]: 'swamp',
      [INDEXER_ENV.queueUrl]: 'https://sqs.local/q',
      [INDEXER_ENV.bucketOwner]: '123456789012',
    };
    // WHEN the handler reads its configuration
    const reads = readsOf(env);
    // THEN the configuration variables are all read (the function's memory too), and nothing outside the contract (and the SDK's region) is
    for (const name of [
      INDEXER_ENV.bucket,
      INDEXER_ENV.prefixes,
      INDEXER_ENV.queueUrl,
      INDEXER_ENV.bucketOwner,
      RUNTIME_ENV.functionMemory,
    ])
      expect(reads).toContain(name);
    const known = new Set<string>([
      ...Object.values(INDEXER_ENV),
      ...Object.values(TUNING_ENV),
      ...Object.values(RUNTIME_ENV),
      'AWS_REGION',
      'AWS_DEFAULT_REGION',
    ]);
    expect([...reads].filter((name) => !known.has(name))).toEqual([]);
    // The bucket owner reaches the S3 settings, so every request expects it.
    expect(parseConfig(env).s3.expectedBucketOwner).toBe('123456789012');
  });

  test('the construct sets the bucket owner to the deploying account, and the handler refuses one that is no account id', () => {
    const { template } = indexerStack({ prefixes: ['swamp'] });
    const fn = propsOf(template, 'AWS::Lambda::Function', 'IndexerFunction') as { Environment: { Variables: Record<string, unknown> } };
    expect(fn.Environment.Variables[INDEXER_ENV.bucketOwner]).toEqual({ Ref: 'AWS::AccountId' });
    expect(() => parseConfig({ [INDEXER_ENV.bucket]: 'b', [INDEXER_ENV.bucketOwner]: 'me' })).toThrow(
      /DATASTORE_BUCKET_OWNER must be an AWS account id/,
    );
  });

  test("a heal's memory budget reads the function's memory from the variable the runtime sets, and nothing else", () => {
    // GIVEN the environment of a 1024 MiB function
    const env = { [RUNTIME_ENV.functionMemory]: '1024' };
    // WHEN the library decides a heal's memory budget
    const reads = readsOf(env, (e) => memoryBudget(undefined, e));
    // THEN it read that variable alone, and its budget says the function's memory
    expect([...reads]).toEqual([RUNTIME_ENV.functionMemory]);
    expect(memoryBudget(undefined, env).memory).toBe('1024 MiB of function memory');
    expect(Object.values(INDEXER_ENV)).not.toContain(RUNTIME_ENV.functionMemory);
  });
});
