/**
 * `baton/worker`: what a program embedding a Baton worker needs. Either `runWorkerFromEnv(process.env)` (what
 * `baton worker` runs), or the parts: read the configuration, load the agents into a catalog, open a pool and a
 * Temporal connection, `createBatonWorker`, and `worker.run()`. Bundle the workflows once with
 * `bundleBatonWorkflows` (or `baton bundle`) to start workers without webpack.
 */
export {
  bundleBatonWorkflows,
  createBatonWorker,
  type BatonWorkerOptions,
  type WorkerTuningOptions,
} from './create-worker';
export { createAgentCatalog, type AgentCatalog, type AgentCatalogOptions } from './agent-catalog';
export {
  AgentConfigError,
  checkCapabilities,
  checkOutputs,
  loadAgents,
  parseAgentFile,
  type LoadAgentsOptions,
} from './agents';
export { outputSchema, type OutputSchema } from '../activities/output';
export type { AgentDefinition, AgentRegistry } from '../common/agent-definition';
export { createModelClient, createProviderClients, describeModelRoutes } from './model-client';
export { DEFAULT_PROVIDER, type ModelProviders } from '../activities/model-providers';
export type { ModelLimit, ModelLimits } from '../activities/model-limits';
export type { ModelPrice, ModelPrices } from '../activities/model-prices';
export { describeUserTools, loadToolModules } from './tool-modules';
export { prepareUserTools, ToolDefinitionError, type UserTool } from '../activities/tools/user-tools';
export { describeMcpServers, readMcpConfig, startMcpServers } from './mcp';
export {
  connectMcpServers,
  type ConnectMcpServersOptions,
  type McpServers,
  type McpServerStatus,
} from '../activities/tools/mcp-servers';
export { McpConfigError, parseMcpConfig, type McpConfig, type McpServerConfig } from '../activities/tools/mcp-config';
export { connectTemporal, TemporalConnectError } from './connection';
export { installRuntime, LOG_LEVELS, parseLogLevel, type RuntimeTelemetryOptions } from './runtime';
export { startHealthServer, type HealthServer } from './health';
export {
  readTracingSettings,
  startTracing,
  type BatonWorkerTracing,
  type StartedTracing,
  type TracingSettings,
} from './tracing';
export {
  ConfigError,
  DEFAULT_ARC_DATA_DIR,
  describeDecisionSigning,
  readDecisionKey,
  readModelLimits,
  readModelPrices,
  readModelStream,
  readProviders,
  readSetupConfig,
  readToolsConfig,
  readWorkerConfig,
  toolEnvironment,
  UNSIGNED_DECISIONS_WARNING,
  type DecisionKey,
  type ModelConfig,
  type ProviderConfig,
  type SetupConfig,
  type TemporalConnectionConfig,
  type TemporalTlsConfig,
  type ToolsConfig,
  type WorkerConfig,
  type WorkerTuning,
} from './config';
export {
  runSetupFromEnv,
  runWorkerFromEnv,
  WORKER_READY_PREFIX,
  writeWorkflowBundle,
  type RunWorkerOptions,
} from './main';
export { WORKFLOWS_PATH, workflowBundleProblem } from './workflow-bundle';
export { createPool, type CreatePoolOptions } from '../db/pool';
export { migrate, MigrationError, type MigrateOptions, type MigrateResult } from '../db/migrate';
