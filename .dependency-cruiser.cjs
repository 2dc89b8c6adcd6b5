/** The import graph's rules, checked by `npm test` (`npm run check:imports`). */
module.exports = {
  forbidden: [
    {
      name: 'no-cycle',
      severity: 'error',
      comment: 'A cycle, type-only or not, means a concept has no home of its own: move what both sides share into a module of its own.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-test-to-bench',
      severity: 'error',
      comment: 'Tests and benchmarks share what they need through support/, never each other.',
      from: { path: '^test/' },
      to: { path: '^bench/' },
    },
    {
      name: 'no-bench-to-test',
      severity: 'error',
      comment: 'Tests and benchmarks share what they need through support/, never each other.',
      from: { path: '^bench/' },
      to: { path: '^test/' },
    },
  ],
  options: {
    // Type-only imports are edges too: a type-only cycle is still a tangle.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|cdk\\.out|node_modules)/' },
  },
};
