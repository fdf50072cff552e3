/**
 * Baton as an MCP server (`baton mcp serve`): any MCP client starts threads, reads replies and transcripts, answers
 * questions, decides approvals and reads env data through the client SDK, over stdio or Streamable HTTP on loopback.
 * A client of Baton like the CLI, so it sits above client/ and explorer/ (whose loopback guards it shares).
 */
export { ClientSource } from './connection';
export { DEFAULT_MCP_PORT, MAX_MCP_BODY_BYTES, MCP_PATH, startMcpHttpServer, type McpHttpServer } from './http';
export { createBatonMcpServer, type BatonMcpServerOptions } from './server';
export { serveStdio } from './stdio';
export {
  DEFAULT_ACCEPT_WAIT_SECONDS,
  DEFAULT_STATUS_WAIT_SECONDS,
  DEFAULT_WAIT_SECONDS,
  MAX_WAIT_SECONDS,
  TOOLS,
} from './tools';
