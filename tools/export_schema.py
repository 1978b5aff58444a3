"""Writes the config's JSON Schema to stdout (`make schema` stores it as config/schema.json)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from platform_config import json_schema

print(json.dumps(json_schema(), indent=2, sort_keys=True))
