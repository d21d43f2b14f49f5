"""Pictures of attribution maps: heatmaps, overlays, panels, PNG I/O (matplotlib, Pillow)."""
