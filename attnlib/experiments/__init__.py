"""What the chapters run: one module per experiment family of the book."""
