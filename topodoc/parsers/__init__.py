"""topodoc.parsers"""
