"""The wire formats of the model-call routes, one module each, on the seam of `base.py`:
`openai_chat`, `openai_embeddings`, `openai_moderation`, `openai_responses` (OpenAI's wire, on the
OpenAI-format channels of `openai_compat`), `anthropic_messages` (Anthropic's, on Anthropic channels),
`gemini_generate`, `gemini_embed` (Google's, on Gemini channels; `gemini_methods` picks one by the method a
Gemini path names), and the conversion between OpenAI's chat and Anthropic's Messages, one module per
direction (`chat_via_anthropic`, `messages_via_openai`), put with the pass-through by `chat_routes`."""
