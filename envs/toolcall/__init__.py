"""The tool-call setting: ReTool-style math with a sandboxed Python tool (`math/<n>`) and BFCL v4 multi-turn
function calling against BFCL's stateful API simulations (`bfcl/<entry id>`), listed together by `source.ToolCallTasks`.
"""
