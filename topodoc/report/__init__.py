"""topodoc.report"""
