"""topodoc.rules"""
