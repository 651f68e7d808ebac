"""Text and image encoders shared by the model families: the T5 family (UMT5, T5 v1.1, byT5), the ViT family (CLIP
vision and text, SigLIP), decoder LLMs (Llama-3, Qwen2.5-VL's text tower, Gemma-3), their tokenizers and chat
templates."""
