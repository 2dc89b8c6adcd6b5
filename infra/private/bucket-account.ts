import { Aws, CfnRule, Fn, Stack, Token } from 'aws-cdk-lib';
import type { IBucket } from 'aws-cdk-lib/aws-s3';
import type { Construct } from 'constructs';
import { DatastoreIndexerPropError } from '../errors';

/**
 * The account that must own the bucket: the deploying account. A bucket whose account is known and differs
 * cannot work (its owner's policies and notifications are out of reach, and every request expects this account),
 * so it is refused at synth; one known only at deploy time is checked by a CloudFormation rule.
 */
export function bucketAccount(scope: Construct, bucket: IBucket): string {
  const stack = Stack.of(scope);
  const given = bucket.env.account;
  if (Token.isUnresolved(given) || given === stack.account) return stack.account;
  if (!Token.isUnresolved(stack.account)) {
    throw new DatastoreIndexerPropError(
      'bucket',
      `belongs to account ${given}, but the stack deploys to ${stack.account}; deploy the indexer in the bucket's own account`,
    );
  }
  new CfnRule(scope, 'BucketInDeployingAccount', {
    assertions: [
      {
        assert: Fn.conditionEquals(Aws.ACCOUNT_ID, given),
        assertDescription: `The shared bucket belongs to account ${given}: deploy the datastore indexer in that account.`,
      },
    ],
  });
  return given;
}
