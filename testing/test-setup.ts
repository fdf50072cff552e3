/** Loaded into every test process (`node --import`): quiet SDK logs unless BATON_LOG_LEVEL asks for more. */
import { installRuntime, parseLogLevel } from '../worker/runtime';

installRuntime(parseLogLevel(process.env.BATON_LOG_LEVEL));
