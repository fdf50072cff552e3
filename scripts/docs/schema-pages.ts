/**
 * The JSON Schemas of the files users write, generated from the zod schemas that parse them: an agent file's
 * frontmatter (common/agent-definition.ts), the MCP configuration file (activities/tools/mcp-config.ts) and an
 * evaluation's dataset (evals/dataset.ts); and of the report an evaluation prints (evals/report.ts). Each is the
 * schemas' input side (`io: 'input'`): what a file may say, defaults optional. Checks zod runs in code (a watch
 * pattern's wildcards, `timeout_s` not above `max_timeout_s`, a `${VAR}` that is set) are not in them.
 */
import { z } from 'zod';
import { agentFrontmatterSchema } from '../../common/agent-definition';
import { mcpConfigFileSchema } from '../../activities/tools/mcp-config';
import { datasetSchema } from '../../evals/dataset';
import { experimentReportSchema } from '../../evals/report';
import { GENERATED_JSON_NOTICE } from './notice';

/** Each schema's `$id`: a name, not an address (the project names no site of its own). */
const SCHEMA_ID_BASE = 'urn:baton:schema:';

export const AGENT_FRONTMATTER_SCHEMA_FILE = 'agent-frontmatter.schema.json';
export const MCP_CONFIG_SCHEMA_FILE = 'mcp-config.schema.json';
export const EVAL_DATASET_SCHEMA_FILE = 'eval-dataset.schema.json';
export const EVAL_REPORT_SCHEMA_FILE = 'eval-report.schema.json';

export function agentFrontmatterJsonSchema(): Record<string, unknown> {
  return jsonSchema(agentFrontmatterSchema, AGENT_FRONTMATTER_SCHEMA_FILE, 'Baton agent file frontmatter');
}

export function mcpConfigJsonSchema(): Record<string, unknown> {
  return jsonSchema(mcpConfigFileSchema, MCP_CONFIG_SCHEMA_FILE, 'Baton MCP configuration file');
}

export function schemaPages(): Record<string, string> {
  return {
    [AGENT_FRONTMATTER_SCHEMA_FILE]: `${JSON.stringify(agentFrontmatterJsonSchema(), null, 2)}\n`,
    [MCP_CONFIG_SCHEMA_FILE]: `${JSON.stringify(mcpConfigJsonSchema(), null, 2)}\n`,
    [EVAL_DATASET_SCHEMA_FILE]: `${JSON.stringify(jsonSchema(datasetSchema, EVAL_DATASET_SCHEMA_FILE, 'Baton evaluation dataset'), null, 2)}\n`,
    [EVAL_REPORT_SCHEMA_FILE]: `${JSON.stringify(jsonSchema(experimentReportSchema, EVAL_REPORT_SCHEMA_FILE, 'Baton evaluation report'), null, 2)}\n`,
  };
}

function jsonSchema(schema: z.ZodType, file: string, title: string): Record<string, unknown> {
  const { $schema, ...rest } = z.toJSONSchema(schema, { io: 'input' }) as Record<string, unknown>;
  return { $comment: GENERATED_JSON_NOTICE, $schema, $id: `${SCHEMA_ID_BASE}${file}`, title, ...rest };
}
