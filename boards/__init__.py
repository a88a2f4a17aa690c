"""stepforge.boards"""
