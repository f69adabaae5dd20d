"""Reading the small files a user hands sp-dspy: each problem is one error line.

:func:`read_json_file` reads bounded JSON from a regular file (else ``DataError``);
:func:`read_yaml_file` a YAML document with each top-level key's line (else ``ConfigError``).
"""

from sp_dspy._data import read_json_file
from sp_dspy._yaml_lines import read_yaml_file

__all__ = ["read_json_file", "read_yaml_file"]
