"""Reading the small files a user hands sp-dspy, public: each problem is one error line.

- :func:`read_json_file`: a JSON document (an artifact's manifest or program state, a
  split) from a regular file of bounded size; a FIFO, a device or a directory is a
  ``DataError`` before a byte is read.
- :func:`read_yaml_file`: a YAML settings document and the line of each top-level key,
  so a later validation error can name ``FILE:LINE``; problems are a ``ConfigError``.
"""

from sp_dspy._data._scan import read_json_file
from sp_dspy._yaml_lines import read_yaml_file

__all__ = ["read_json_file", "read_yaml_file"]
