import { Match, type Template } from 'aws-cdk-lib/assertions';
import { Key } from 'aws-cdk-lib/aws-kms';
import { Bucket, BucketEncryption } from 'aws-cdk-lib/aws-s3';
import { QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { EventDelivery } from '../../infra/props';
import { appStack, importedArn, indexerStack, logicalIdOf, propsOf } from './helpers';

const KEY_ARN = 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab';

interface Statement {
  Sid?: string;
  Effect: string;
  Action: string | string[];
  Resource: unknown;
  Condition?: unknown;
}

/** Every statement of every identity policy in the template, with the policy's logical id. */
function allStatements(template: Template): { policy: string; statement: Statement }[] {
  return Object.entries(template.findResources('AWS::IAM::Policy')).flatMap(([policy, r]) =>
    (r.Properties.PolicyDocument.Statement as Statement[]).map((statement) => ({ policy, statement })),
  );
}

const asList = <T>(x: T | T[]): T[] => (Array.isArray(x) ? x : [x]);

/** The condition every S3 statement of the role holds: the bucket belongs to the deploying account. */
const OWNED = { StringEquals: { 's3:ResourceAccount': { Ref: 'AWS::AccountId' } } };

describe('DatastoreIndexer IAM', () => {
  test('grants List and Get under each prefix, Put and Delete only on the names the indexer writes', () => {
    // GIVEN / WHEN
    const { template } = indexerStack({ prefixes: ['swamp', 'infra'], namespaces: ['swamp/team-a'] });
    // THEN
    expect(propsOf(template, 'AWS::IAM::Policy', 'IndexerDatastoreAccess').PolicyDocument).toEqual({
      Version: '2012-10-17',
      Statement: [
        {
          Sid: 'ListDatastoreRoots',
          Effect: 'Allow',
          Action: 's3:ListBucket',
          Resource: importedArn(),
          Condition: { ...OWNED, StringLike: { 's3:prefix': ['swamp', 'swamp/', 'swamp/*', 'infra', 'infra/', 'infra/*'] } },
        },
        {
          Sid: 'ReadDatastoreObjects',
          Effect: 'Allow',
          Action: 's3:GetObject',
          Resource: [importedArn('/swamp/*'), importedArn('/infra/*')],
          Condition: OWNED,
        },
        {
          Sid: 'WriteIndexerKeys',
          Effect: 'Allow',
          Action: 's3:PutObject',
          Resource: [
            importedArn('/swamp/.datastore-index.json'),
            importedArn('/swamp/_index/*.json'),
            importedArn('/swamp/.datastore.lock'),
            importedArn('/swamp/_control/datastore-indexer/*'),
            importedArn('/swamp/team-a/.datastore-index.json'),
            importedArn('/swamp/team-a/_index/*.json'),
            importedArn('/infra/.datastore-index.json'),
            importedArn('/infra/_index/*.json'),
            importedArn('/infra/.datastore.lock'),
            importedArn('/infra/_control/datastore-indexer/*'),
          ],
          Condition: OWNED,
        },
        {
          Sid: 'DeleteLocksAndControlKeys',
          Effect: 'Allow',
          Action: 's3:DeleteObject',
          Resource: [
            importedArn('/swamp/.datastore.lock'),
            importedArn('/swamp/_control/datastore-indexer/*'),
            importedArn('/infra/.datastore.lock'),
            importedArn('/infra/_control/datastore-indexer/*'),
          ],
          Condition: OWNED,
        },
      ],
    });
  });

  test('at the bucket root, lists without a prefix condition, reads every key and writes only internal names', () => {
    const { template } = indexerStack();
    expect(propsOf(template, 'AWS::IAM::Policy', 'IndexerDatastoreAccess').PolicyDocument).toEqual({
      Version: '2012-10-17',
      Statement: [
        { Sid: 'ListDatastoreRoots', Effect: 'Allow', Action: 's3:ListBucket', Resource: importedArn(), Condition: OWNED },
        { Sid: 'ReadDatastoreObjects', Effect: 'Allow', Action: 's3:GetObject', Resource: importedArn('/*'), Condition: OWNED },
        {
          Sid: 'WriteIndexerKeys',
          Effect: 'Allow',
          Action: 's3:PutObject',
          Resource: [
            importedArn('/.datastore-index.json'),
            importedArn('/_index/*.json'),
            importedArn('/.datastore.lock'),
            importedArn('/_control/datastore-indexer/*'),
          ],
          Condition: OWNED,
        },
        {
          Sid: 'DeleteLocksAndControlKeys',
          Effect: 'Allow',
          Action: 's3:DeleteObject',
          Resource: [importedArn('/.datastore.lock'), importedArn('/_control/datastore-indexer/*')],
          Condition: OWNED,
        },
      ],
    });
  });

  test('no delete pattern matches a data key or a client control record: IAM `*` crosses `/`', () => {
    const { template } = indexerStack({ prefixes: ['swamp'] });
    const document = propsOf(template, 'AWS::IAM::Policy', 'IndexerDatastoreAccess').PolicyDocument as {
      Statement: { Sid: string; Resource: unknown }[];
    };
    const statement = document.Statement.find((s) => s.Sid === 'DeleteLocksAndControlKeys')!;
    // The object key part of each ARN, as an IAM glob: `*` matches anything, slashes included.
    const patterns = asList(statement.Resource).map((r) => {
      const key = JSON.stringify(r).match(/:::[^/"]+\/([^"]*)"/)![1];
      return new RegExp(`^${key.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`);
    });
    const deletable = (key: string): boolean => patterns.some((p) => p.test(key));
    const never = [
      'swamp/data/aws/x/_control/y',
      'swamp/team/data/x/.datastore.lock',
      'swamp/data/.datastore.lock',
      'swamp/team/_control/datastore-indexer/x',
      'swamp/_control/workflow-state/run-1',
      'swamp/.datastore-index.json',
      'swamp/_index/_meta.json',
      'swamp-other/.datastore.lock',
    ];
    expect(never.filter(deletable)).toEqual([]);
    expect(
      [
        'swamp/.datastore.lock',
        'swamp/_control/datastore-indexer/unreadable/ns/team/x',
        'swamp/_control/datastore-indexer/repair/root/progress.json',
      ].every(deletable),
    ).toBe(true);
  });

  test('the function role itself holds only its log group and its queue', () => {
    const { template } = indexerStack({ prefixes: ['swamp'] });
    const logGroup = logicalIdOf(template, 'AWS::Logs::LogGroup', 'IndexerLogGroup');
    const queueArn = { 'Fn::GetAtt': [logicalIdOf(template, 'AWS::SQS::Queue', 'IndexerQueue'), 'Arn'] };
    expect(propsOf(template, 'AWS::IAM::Policy', 'IndexerServiceRoleDefaultPolicy').PolicyDocument).toEqual({
      Version: '2012-10-17',
      Statement: [
        { Effect: 'Allow', Action: ['logs:CreateLogStream', 'logs:PutLogEvents'], Resource: { 'Fn::GetAtt': [logGroup, 'Arn'] } },
        {
          Effect: 'Allow',
          Action: ['sqs:ReceiveMessage', 'sqs:ChangeMessageVisibility', 'sqs:GetQueueUrl', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes'],
          Resource: queueArn,
        },
        // The Lambda sends itself re-checks, continuations and finishes (DATASTORE_QUEUE_URL): SendMessage alone.
        { Effect: 'Allow', Action: 'sqs:SendMessage', Resource: queueArn },
      ],
    });
  });

  test('a queue encrypted with a KMS key of its own: sending needs GenerateDataKey and Decrypt on that key, nothing else', () => {
    // GIVEN a queue the app encrypts with its own key
    const { template } = indexerStack((stack) => ({
      prefixes: ['swamp'],
      queueProps: { encryption: QueueEncryption.KMS, encryptionMasterKey: new Key(stack, 'QueueKey') },
    }));
    const keyArn = { 'Fn::GetAtt': [logicalIdOf(template, 'AWS::KMS::Key', 'QueueKey'), 'Arn'] };
    const statements = (
      propsOf(template, 'AWS::IAM::Policy', 'IndexerServiceRoleDefaultPolicy').PolicyDocument as { Statement: Statement[] }
    ).Statement;
    // THEN the send statement is SendMessage alone, and the key is granted what a producer needs
    expect(statements.filter((s) => asList(s.Action).includes('sqs:SendMessage')).map((s) => s.Action)).toEqual(['sqs:SendMessage']);
    expect(statements).toContainEqual({ Effect: 'Allow', Action: ['kms:GenerateDataKey', 'kms:Decrypt'], Resource: keyArn });
    expect(
      statements
        .flatMap((s) => asList(s.Action))
        .filter((a) => a.startsWith('kms:') && !['kms:GenerateDataKey', 'kms:Decrypt'].includes(a)),
    ).toEqual([]);
  });

  test('the function waits for its S3 policy before it can be invoked', () => {
    const { template } = indexerStack({ prefixes: ['swamp'] });
    const policy = logicalIdOf(template, 'AWS::IAM::Policy', 'IndexerDatastoreAccess');
    template.hasResource('AWS::Lambda::Function', {
      Properties: Match.objectLike({ Handler: 'index.handler' }),
      DependsOn: Match.arrayWith([policy]),
    });
  });

  test('grants Decrypt and GenerateDataKey through S3 only when the bucket key is given', () => {
    // GIVEN
    const withKey = indexerStack((stack) => ({ prefixes: ['swamp'], encryptionKey: Key.fromKeyArn(stack, 'K', KEY_ARN) })).template;
    const withoutKey = indexerStack({ prefixes: ['swamp'] }).template;
    // THEN
    const kms = allStatements(withKey).filter(({ statement }) => asList(statement.Action).some((a) => a.startsWith('kms:')));
    expect(kms.map((k) => k.statement)).toEqual([
      {
        Sid: 'UseBucketKeyThroughS3',
        Effect: 'Allow',
        Action: ['kms:Decrypt', 'kms:GenerateDataKey'],
        Resource: KEY_ARN,
        Condition: { StringEquals: { 'kms:ViaService': { 'Fn::Join': ['', ['s3.', { Ref: 'AWS::Region' }, '.amazonaws.com']] } } },
      },
    ]);
    expect(JSON.stringify(withoutKey.toJSON())).not.toContain('kms:');
  });

  test("a bucket created with a KMS key uses that key's ARN", () => {
    const { template } = indexerStack(
      { prefixes: ['swamp'] },
      (stack) => new Bucket(stack, 'Shared', { encryption: BucketEncryption.KMS }),
    );
    const key = logicalIdOf(template, 'AWS::KMS::Key', 'SharedKey');
    template.hasResourceProperties('AWS::IAM::Policy', {
      PolicyDocument: {
        Statement: Match.arrayWith([Match.objectLike({ Sid: 'UseBucketKeyThroughS3', Resource: { 'Fn::GetAtt': [key, 'Arn'] } })]),
      },
    });
  });

  test.each([
    ['S3 notifications', EventDelivery.S3_NOTIFICATIONS],
    ['EventBridge', EventDelivery.EVENTBRIDGE],
  ])('with %s, no statement in the stack grants an S3 action on * or outside the prefixes', (_name, eventDelivery) => {
    // GIVEN: the app's stack, which also holds CDK's notifications handler
    const { template } = appStack({ prefixes: ['swamp', 'infra'], eventDelivery, kmsKeyArn: KEY_ARN });
    const bucket = 'arn:<AWS::Partition>:s3:::shared-bucket';
    // WHEN
    const s3 = allStatements(template).filter(({ statement }) => asList(statement.Action).some((a) => a.startsWith('s3:')));
    const outside = s3.flatMap(({ policy, statement }) =>
      asList(statement.Resource)
        .map(flat)
        .filter((r) => r !== bucket && !r.startsWith(`${bucket}/swamp/`) && !r.startsWith(`${bucket}/infra/`))
        .map((r) => `${policy}: ${asList(statement.Action).join(',')} on ${r}`),
    );
    // THEN
    expect(s3.length).toBeGreaterThanOrEqual(3);
    expect(s3.flatMap(({ statement }) => asList(statement.Action))).not.toContain('s3:*');
    expect(outside).toEqual([]);
  });
});

/** An ARN as text: `Fn::Join` joined, `Ref` as `<Name>`; `*` stays `*`. */
function flat(resource: unknown): string {
  if (typeof resource === 'string') return resource;
  const o = resource as { 'Fn::Join'?: [string, unknown[]]; Ref?: string };
  if (o['Fn::Join']) return o['Fn::Join'][1].map(flat).join(o['Fn::Join'][0]);
  if (o.Ref) return `<${o.Ref}>`;
  return JSON.stringify(resource);
}
