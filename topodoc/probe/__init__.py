"""topodoc.probe"""
