"""Check rules: they report what is unsafe in the regions a project has or is about to get."""
